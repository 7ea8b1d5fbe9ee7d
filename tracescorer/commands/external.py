"""Other tools' evaluations beside tracescorer's own scores in ``scores`` and ``explain``.

External evaluations (``gen_ai.evaluation.result`` events received over OTLP) are shown as score
rows with ``source = external``, the evaluation name as the scorer id; in tables the scorer id is
marked ``(external)``.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import click

from tracescorer.commands.common import as_datetime
from tracescorer.store.api import QueryResult

if TYPE_CHECKING:
    from tracescorer.store.api import ReadStore

EXTERNAL_MARK = " (external)"


def with_external(own: QueryResult, external: QueryResult, *, limit: int, all_columns: bool) -> QueryResult:
    """The scores read (newest first) and the matching external evaluations (newest first, in the
    shape of score rows) together in the scores' columns, by update time oldest first, the newest
    ``limit`` kept (tables: the scorer id marked)."""
    columns = own.columns
    added = []
    for row in external.dicts():
        if not all_columns:
            row["scorer_id"] = f"{row['scorer_id']}{EXTERNAL_MARK}"
        added.append(tuple(row.get(c) for c in columns))
    rows = [*reversed(own.rows), *reversed(added)]
    at = columns.index("updated_at") if "updated_at" in columns else None
    if at is not None and added:
        rows.sort(key=lambda r: as_datetime(r[at]) if r[at] is not None else dt.datetime.min.replace(tzinfo=dt.UTC))
    return QueryResult(
        columns=columns,
        types=own.types,
        rows=rows[-limit:],
        truncated=own.truncated or external.truncated or len(rows) > limit,
    )


async def explain_external(reads: ReadStore, targets: list[tuple[str, str, str, str]]) -> None:
    """Print the external evaluations of the explained runs and conversations."""
    runs = [t for kind, t, _, _ in targets if kind == "run"]
    conversations = [t for kind, t, _, _ in targets if kind == "conversation"]
    if not runs and not conversations:
        return
    traces = [r["trace_id"] for r in (await reads.run_traces(runs)).dicts()] if runs else []
    found = (await reads.external_for_targets(traces, conversations)).dicts()
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
