"""The ``tracescorer`` command line."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import click
import yaml

from tracescorer.commands.common import config_option, load, row_limit, run_query
from tracescorer.output import FORMATS

@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tracescorer")
def main() -> None:
    """Score AI agents in production from their OpenTelemetry traces."""


@main.command()
@config_option
def serve(config_path: str | None) -> None:
    """Run the daemon: OTLP receivers, span log, scoring."""
    settings = load(config_path)
    logging.basicConfig(
        level=settings.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from tracescorer.app import App
    from tracescorer.store.duckdb import StoreError as _StoreError

    # The DuckDB writer thread needs the GIL briefly before and after each statement; with the
    # default 5 ms switch interval it waits behind the event loop's decoding and group commits
    # stall (measured: ~2x throughput with 0.5 ms, see bench/ingest.py).
    sys.setswitchinterval(0.0005)

    try:
        asyncio.run(App(settings).run())
    except (_StoreError, OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


@main.command("check-config")
@config_option
def check_config(config_path: str | None) -> None:
    """Validate the configuration and print the effective values (secrets masked)."""
    settings = load(config_path)
    click.echo(yaml.safe_dump(settings.masked(), sort_keys=False).rstrip())
    click.echo("# configuration is valid", err=True)


@main.command()
@config_option
@click.argument("sql")
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default="table", show_default=True)
@click.option("--max-rows", type=click.IntRange(min=1), default=None, help="Row limit (default: store.query_max_rows).")
def query(config_path: str | None, sql: str, fmt: str, max_rows: int | None) -> None:
    """Run one read-only SQL statement against the database and print the rows."""
    settings = load(config_path)
    limit = row_limit(settings, max_rows)
    result = run_query(settings, sql, limit)
    click.echo(FORMATS[fmt](result["columns"], result["rows"]))
    if result["truncated"]:
        click.echo(f"(truncated at {limit} rows)", err=True)


@main.command()
@click.option("--keep", is_flag=True, help="Keep the demo's working directory.")
def demo(keep: bool) -> None:
    """Start a daemon, send sample agent traffic with the OTel SDK, print what was stored."""
    from tracescorer.demo import run_demo

    sys.exit(run_demo(keep=keep))


def _register() -> None:
    from tracescorer.commands import backfill, monitors, replay, report, runs, scores

    main.add_command(runs.runs)
    main.add_command(replay.replay)
    main.add_command(scores.scores)
    main.add_command(scores.explain)
    main.add_command(scores.scorers)
    main.add_command(backfill.backfill)
    main.add_command(monitors.monitors)
    main.add_command(report.report)


_register()

if __name__ == "__main__":  # pragma: no cover
    main()
