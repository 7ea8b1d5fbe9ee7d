"""The ``tracescorer`` command line.

Start-up cost matters here (``tracescorer --help``, read commands): modules import only click
at the top, and each command imports what it needs when it runs.
"""

from __future__ import annotations

import logging
import sys

import click

from tracescorer.commands.common import FORMAT_NAMES, config_option, load, row_limit, run_query

log = logging.getLogger("tracescorer.cli")

#: the commands of ``tracescorer.commands``: name -> (module, function)
_COMMANDS = {
    "runs": ("runs", "runs"),
    "replay": ("replay", "replay"),
    "scores": ("scores", "scores"),
    "explain": ("explain", "explain"),
    "scorers": ("scorers", "scorers"),
    "backfill": ("backfill", "backfill"),
    "monitors": ("monitors", "monitors"),
    "report": ("report", "report"),
    "label": ("labels", "label"),
    "label-queue": ("labels", "label_queue"),
    "agreement": ("agreement", "agreement"),
    "disagreements": ("agreement", "disagreements"),
    "reload": ("reload", "reload"),
}


class _Group(click.Group):
    """The command group; a command of ``tracescorer.commands`` is imported when it is run (or
    listed by ``--help``), not every one at each start."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is None and cmd_name in _COMMANDS:
            import importlib

            module, name = _COMMANDS[cmd_name]
            found = getattr(importlib.import_module(f"tracescorer.commands.{module}"), name)
            self.add_command(found, cmd_name)
        return found


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tracescorer")
def main() -> None:
    """Score AI agents in production from their OpenTelemetry traces."""


@main.command()
@config_option
def serve(config_path: str | None) -> None:
    """Run the daemon: OTLP receivers, span log, scoring."""
    import asyncio

    from tracescorer import logs
    from tracescorer.config import ConfigError, check_store_path

    settings = load(config_path, reading=False)
    logs.configure(settings.log.level, settings.log.format)
    try:
        created = check_store_path(settings.store.path)
        if created is not None:
            created.mkdir(mode=0o700, parents=True, exist_ok=True)  # the database's alone, as its files
            log.info("store.path: created directory %s for the database", created)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(
            f"store.path: cannot create the directory of {settings.store.path!r}: {exc.strerror or exc}"
        ) from None
    from tracescorer.app import App
    from tracescorer.runner.bindings import BindingError
    from tracescorer.store.api import StoreError

    # The DuckDB writer thread needs the GIL briefly before and after each statement; with the
    # default 5 ms switch interval it waits behind the event loop's decoding and group commits
    # stall (measured: ~2x throughput with 0.5 ms, see bench/ingest.py).
    sys.setswitchinterval(0.0005)
    from tracescorer.runtime import tune_gc

    tune_gc()

    try:
        asyncio.run(App(settings, config_path=config_path).run())
    except (StoreError, BindingError, OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


@main.command("check-config")
@config_option
def check_config(config_path: str | None) -> None:
    """Validate the configuration as serve would (scorer bindings too), print the effective values.

    Secrets are masked.
    """
    import yaml

    from tracescorer.config import ConfigError, check_store_path
    from tracescorer.runner.bindings import BindingError, build_bindings

    settings = load(config_path, reading=False)
    try:
        created = check_store_path(settings.store.path)
        bound = build_bindings(settings.scorers, settings.judge)
    except (ConfigError, BindingError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(yaml.safe_dump(settings.masked(), sort_keys=False).rstrip())
    if created is not None:
        click.echo(f"# store.path: directory {created} does not exist yet; serve will create it", err=True)
    if not bound:
        click.echo("# no scorers are bound: traces are stored and runs rebuilt, but nothing is scored", err=True)
    click.echo(f"# configuration is valid ({len(bound)} scorer binding(s) built)", err=True)


@main.command()
@config_option
@click.argument("sql")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMAT_NAMES),
    default="table",
    show_default=True,
    help="json: one array of objects; jsonl: one object per line.",
)
@click.option("--wide", is_flag=True, help="Tables: every column and every cell in full.")
@click.option("--max-rows", type=click.IntRange(min=1), default=None, help="Row limit (default: store.query_max_rows).")
def query(config_path: str | None, sql: str, fmt: str, wide: bool, max_rows: int | None) -> None:
    """Run one read-only SQL statement against the database and print the rows.

    postgres mode: spans, log_records and assembled_traces are this daemon's span log (DuckDB SQL);
    every other table is shared in PostgreSQL (PostgreSQL SQL). One statement reads one or the other.
    """
    from tracescorer.output import FORMATS, format_table

    settings = load(config_path)
    limit = row_limit(settings, max_rows)
    result = run_query(settings, sql, limit)
    if fmt == "table":
        click.echo(
            format_table(
                result["columns"],
                result["rows"],
                wide=wide,
                wrap=("reason", "error", "detail"),
                types=result.get("types"),
            )
        )
    else:
        click.echo(FORMATS[fmt](result["columns"], result["rows"]))
    if result["truncated"]:
        click.echo(f"(truncated at {limit} rows)", err=True)
    if settings.store.backend == "postgres":
        from tracescorer.commands.common import span_log_note

        note = span_log_note(sql)
        if note:
            click.echo(note, err=True)


@main.command()
@config_option
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(min=0),
    default=0,
    show_default=True,
    help="Seconds to wait for the daemon to become ready.",
)
def ready(config_path: str | None, wait_s: float) -> None:
    """Exit 0 once the daemon of this configuration takes traffic (its /readyz says 200).

    For scripts: `tracescorer serve & tracescorer ready --wait 30 && <send traces>` sends nothing
    before the daemon listens. Exit 1 with the reason when it is not ready in time.
    """
    import time

    settings = load(config_path)
    deadline = time.monotonic() + wait_s
    while True:
        reason = _not_ready(settings.store.path)
        if reason is None:
            return
        if time.monotonic() >= deadline:
            raise click.ClickException(f"not ready{f' after {wait_s:g}s' if wait_s else ''}: {reason}")
        time.sleep(0.1)


def _not_ready(db_path: str) -> str | None:
    """Why the daemon serving ``db_path`` is not ready (None when it is)."""
    import ssl
    import urllib.error
    import urllib.request

    from tracescorer import control

    info = control.read_serve_info(db_path)
    if info is None:
        return f"no daemon is running for {db_path} (no state file {control.serve_info_path(db_path)})"
    if not info.url:  # no HTTP receiver: the state file is written once the daemon serves
        return None
    context = ssl.create_default_context(cafile=info.cafile) if info.cafile else None
    if context is not None:
        context.check_hostname = False  # the state file names 127.0.0.1; the CA is the daemon's own
    try:
        with urllib.request.urlopen(info.url + "/readyz", timeout=5, context=context) as response:
            return None if response.status == 200 else f"/readyz said {response.status}"
    except urllib.error.HTTPError as exc:
        return f"/readyz said {exc.code}: {exc.read().decode(errors='replace').strip()}"
    except OSError as exc:
        return f"{info.url} does not answer: {exc}"


@main.command()
@click.option("--keep", is_flag=True, help="Keep the demo's working directory.")
def demo(keep: bool) -> None:
    """Start a daemon, send sample agent traffic with the OTel SDK, print what was stored."""
    from tracescorer.demo import run_demo

    sys.exit(run_demo(keep=keep))


if __name__ == "__main__":  # pragma: no cover
    main()
