"""``tracescorer report``: an HTML report of score history (daemon running or not)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import click

from tracescorer import control
from tracescorer.commands.common import config_option, load, parse_since


@click.command()
@config_option
@click.option(
    "--since",
    default="7d",
    show_default=True,
    help="Scores of runs (conversations) that ended after this (30m, 2h, 7d or ISO 8601).",
)
@click.option("--scorer", "scorer_id", help="Only this scorer.")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="The HTML file to write.")
@click.option(
    "--worst",
    type=click.IntRange(1, 50),
    default=5,
    show_default=True,
    help="Failures (lowest scores) shown per scorer.",
)
def report(config_path: str | None, since: str, scorer_id: str | None, output: str, worst: int) -> None:
    """Write one self-contained HTML page: trend, pass rate, distribution, the failures and the
    errors (verdict, reason, transcript with tool calls) of every scorer.

    History is keyed on when what was scored ended (a run's end, a conversation's last turn), so
    a backfill does not move it; the trend's axis spans the data. With `report.trace_url` set in
    the configuration, trace ids link to the trace backend.
    """
    from tracescorer.commands.reads import reading
    from tracescorer.output import stamp
    from tracescorer.report.data import collect
    from tracescorer.report.html import render
    from tracescorer.report.reasons import criteria

    settings = load(config_path)
    start = parse_since(since)
    until = dt.datetime.now(dt.UTC)
    if start >= until:
        raise click.BadParameter(f"{since!r} is not in the past", param_hint="--since")
    info = control.read_serve_info(settings.store.path)
    source = f"daemon at {info.url}" if info is not None else f"database {settings.store.path}"
    data = reading(
        settings,
        lambda reads: collect(
            reads,
            since=start,
            until=until,
            scorer_id=scorer_id,
            configured=[b.id for b in settings.scorers],
            worst=worst,
            source=source,
            trace_url=settings.report.trace_url,
            criteria=criteria(settings.scorers),
        ),
    )
    path = Path(output)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(render(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise click.ClickException(f"cannot write {output}: {exc.strerror}") from None
    total = sum(s.n for s in data.scorers)
    click.echo(f"wrote {output}: {len(data.scorers)} scorer(s), {total} score(s) since {stamp(start)}")
    if scorer_id and total == 0:
        click.echo(f"no scores for scorer {scorer_id!r} in this window", err=True)
