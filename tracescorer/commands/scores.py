"""``tracescorer scores``: stored scores, filtered, the newest kept at volume."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from tracescorer.commands.common import FORMAT_NAMES, config_option, load, parse_since

if TYPE_CHECKING:
    from tracescorer.store.api import QueryResult, ReadStore

_SUMMARY = ["scored", "scorer", "score", "verdict", "target", "reason"]
_WIDE = ["scored", "scorer", "score", "verdict", "target", "agent", "trace", "score_id", "cost_usd", "reason"]


@click.command()
@config_option
@click.argument("target", metavar="[ID]", required=False)
@click.option("--scorer", "scorer_id", help="Only this scorer's scores.")
@click.option("--since", help="Only scores written after this (30m, 2h, 7d or ISO 8601).")
@click.option("--status", type=click.Choice(["ok", "error", "not_scorable"]), default=None, help="Only this status.")
@click.option("--label", type=click.Choice(["pass", "fail"]), default=None, help="Only this verdict of a threshold.")
@click.option("--agent", help="Only scores of this agent (a name, or a pattern with * and ?).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMAT_NAMES),
    default="table",
    show_default=True,
    help="csv/json/jsonl print every column of the scores table.",
)
@click.option("--wide", is_flag=True, help="Tables: more columns (agent, trace, score id, cost), cells in full.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="The newest this many (default: store.query_max_rows).",
)
def scores(
    config_path: str | None,
    target: str | None,
    scorer_id: str | None,
    since: str | None,
    status: str | None,
    label: str | None,
    agent: str | None,
    fmt: str,
    wide: bool,
    limit: int | None,
) -> None:
    """Stored scores, newest last.

    ID (a trace, run, conversation or score id, whole or a unique prefix) shows the scores about
    it: a trace's or a run's run scores and the scores of its conversation; a conversation's
    score and its runs' scores. The target column shows ids that `explain`, `runs`, `scores`
    and `backfill` take back. Other tools' evaluations (source external) are shown beside them,
    about the ID too when one is given.
    """
    from tracescorer.commands.reads import reading
    from tracescorer.output import FORMATS, format_table

    settings = load(config_path)
    limit = limit or settings.store.query_max_rows
    when = parse_since(since) if since else None

    async def read(reads: ReadStore) -> QueryResult:
        from tracescorer.commands.external import with_external
        from tracescorer.commands.ids import resolve

        about = None
        if target:
            ref = await resolve(reads, target)
            about = (ref.kind, ref.id)
        # tracescorer's own scores, then other tools' evaluations (source external), on the same filters
        filters: dict[str, Any] = {
            "since": when,
            "status": status,
            "label": label,
            "agent": agent,
            "about": about,
            "all_columns": fmt != "table",
        }
        own = await reads.scores(scorer_id=scorer_id, limit=limit, **filters)
        external = await reads.external_as_scores(name=scorer_id, limit=limit, **filters)
        return with_external(own, external, limit=limit, all_columns=fmt != "table")

    result = reading(settings, read)
    if fmt != "table":
        click.echo(FORMATS[fmt](result.columns, result.rows))
    else:
        from tracescorer.report.reasons import criteria as criteria_of

        criteria = criteria_of(settings.scorers)
        rows = [_row(r, criteria, wide) for r in result.dicts()]
        click.echo(format_table(_WIDE if wide else _SUMMARY, rows, wide=wide, wrap=("reason",)))
        shown = {r["scorer_id"] for r in result.dicts()}
        for sid, criterion in sorted(criteria.items()):
            if sid in shown:
                click.echo(f"# {sid} judges the criterion: {criterion}", err=True)
    if result.truncated:
        click.echo(f"(the newest {limit} shown; older scores match too: --limit, --since or a filter)", err=True)


def _row(r: dict[str, Any], criteria: dict[str, str], wide: bool) -> list[Any]:
    from tracescorer.output import stamp
    from tracescorer.report.reasons import shown_reason

    verdict = r["label"] or r["status"]
    reason = shown_reason(r["reason"] or r["error"] or "", r["scorer_id"], criteria)
    row = [stamp(r["updated_at"]), r["scorer_id"], r["score"], verdict, target_text(r)]
    if wide:
        cost = r["judge_cost_usd"]
        row += [r["agent"], r["trace_id"], r["id"], round(float(cost), 6) if cost is not None else None]
    return [*row, reason]


def target_text(row: dict[str, Any]) -> str:
    """A score's target as an id every command takes: ``conv <conversation id>`` or ``run <run id prefix>``."""
    from tracescorer.commands.ids import short

    if row["entity_type"] == "conversation":
        return f"conv {row['conversation_id']}"
    return f"run {short(row['run_id'])}"
