"""Other tools' evaluations beside tracescorer's own scores in ``scores`` and ``explain``.

External evaluations (``gen_ai.evaluation.result`` events received over OTLP) are shown as score
rows with ``source = external``, the evaluation name as the scorer id; in tables the scorer id is
marked ``(external)``.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import click

from tracescorer.commands.common import as_datetime, rows_of, run_query

if TYPE_CHECKING:
    from tracescorer.config import Settings

EXTERNAL_MARK = " (external)"


def with_external(
    settings: Settings,
    result: dict[str, Any],
    *,
    scorer_id: str | None,
    since: dt.datetime | None,
    status: str | None,
    label: str | None,
    agent: str | None,
    all_columns: bool,
    limit: int,
    about: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """``result`` of the scores query (oldest first) with the matching external evaluations
    added in its columns, by update time, the newest ``limit`` kept (tables: the scorer id marked)."""
    from tracescorer.store import label_queries

    query = label_queries.external_as_scores(
        name=scorer_id, since=since, status=status, label=label, agent=agent, about=about, all_columns=all_columns
    )
    external = run_query(settings, query, limit)
    if not external["rows"]:
        return result
    columns = result["columns"]
    added = []
    for row in rows_of(external):
        if not all_columns:
            row["scorer_id"] = f"{row['scorer_id']}{EXTERNAL_MARK}"
        added.append([row.get(c) for c in columns])
    at = columns.index("updated_at") if "updated_at" in columns else None
    rows = [*result["rows"], *added]
    if at is not None:
        rows.sort(key=lambda r: as_datetime(r[at]) if r[at] is not None else dt.datetime.min.replace(tzinfo=dt.UTC))
    return {
        **result,
        "rows": rows[-limit:],
        "truncated": result["truncated"] or external["truncated"] or len(rows) > limit,
    }


def explain_external(settings: Settings, targets: list[tuple[str, str, str, str]]) -> None:
    """Print the external evaluations of the explained runs and conversations."""
    from tracescorer.store import label_queries

    runs = [t for kind, t, _, _ in targets if kind == "run"]
    conversations = [t for kind, t, _, _ in targets if kind == "conversation"]
    if not runs and not conversations:
        return
    traces = (
        [r["trace_id"] for r in rows_of(run_query(settings, label_queries.run_traces(runs), 10_000))] if runs else []
    )
    found = rows_of(run_query(settings, label_queries.external_for_targets(traces, conversations), 10_000))
    wanted = {("run", r) for r in runs} | {("conversation", c) for c in conversations}
    shown = [e for e in found if (e["target_type"], e["target_id"]) in wanted]
    if not shown:
        return
    click.echo("  other tools' evaluations (external):")
    for e in shown:
        verdict = " ".join(
            part
            for part in (
                f"score={e['score']:g}" if e["score"] is not None else "",
                f"label={e['label']}" if e["label"] else "",
                f"error={e['error_type']}" if e["error_type"] else "",
            )
            if part
        )
        version = f", version {e['evaluator_version']}" if e["evaluator_version"] else ""
        click.echo(
            f"    {e['name']} from {e['source'] or 'an unnamed service'} ({e['kind']}{version}) on "
            f"{e['target_type']} {str(e['target_id'])[:12]}: {verdict or 'no verdict'}"
        )
        if e["explanation"]:
            click.echo(f"      explanation: {' '.join(str(e['explanation']).split())}")
