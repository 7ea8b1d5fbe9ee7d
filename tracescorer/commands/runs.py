"""``tracescorer runs``: the agent runs rebuilt from traces (table, CSV, JSON array or AgentRun jsonl)."""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

import click

from tracescorer.commands.common import FORMAT_NAMES, config_option, load, parse_since

if TYPE_CHECKING:
    import datetime as dt

    from tracescorer.config import Settings
    from tracescorer.model import AgentRun
    from tracescorer.store.api import QueryResult, ReadStore


def _jsonl_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


_PREVIEW = 200  # characters of a run's input and answer in a table (--wide: all)


def _preview(messages: list[dict[str, Any]], role: str, last: bool = False, cut: bool = True) -> str:
    texts = [m.get("content") or "" for m in messages if m.get("role") == role and m.get("content")]
    if not texts:
        return ""
    text = " ".join((texts[-1] if last else texts[0]).split())
    return text[: _PREVIEW - 1] + "…" if cut and len(text) > _PREVIEW else text


_NARROW = ["run", "trace", "started", "agent", "conversation", "status", "tools", "input", "output"]
_WIDE = [
    "run_id",
    "trace_id",
    "started",
    "duration_s",
    "agent",
    "service",
    "conversation",
    "convention",
    "model",
    "status",
    "tools",
    "input",
    "output",
    "error",
]


@click.command()
@config_option
@click.argument("target", metavar="[ID]", required=False)
@click.option("--trace", "trace_id", help="Only runs of this trace (an id or a unique prefix).")
@click.option("--conversation", "conversation_id", help="Only runs of this conversation (an id or a unique prefix).")
@click.option("--since", help="Only runs that started after this (30m, 2h, 7d or ISO 8601).")
@click.option("--unmatched", is_flag=True, help="List traces no convention could rebuild a run from, with the reason.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMAT_NAMES),
    default="table",
    show_default=True,
    help="jsonl: one AgentRun object per line (the AgentRun contract); json: one array of them; "
    "csv: one line per run, nested fields as JSON text.",
)
@click.option("--wide", is_flag=True, help="Tables: more columns (full ids, convention, model, error), cells in full.")
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="The newest this many (default: store.query_max_rows)."
)
def runs(
    config_path: str | None,
    target: str | None,
    trace_id: str | None,
    conversation_id: str | None,
    since: str | None,
    unmatched: bool,
    fmt: str,
    wide: bool,
    limit: int | None,
) -> None:
    """Agent runs rebuilt from the traces, newest last.

    ID (a trace, run, conversation or score id, whole or a unique prefix) shows the runs of a
    trace or a conversation, one run, or the runs a score is about. The run and trace columns
    show prefixes that `explain`, `runs`, `scores` and `backfill` take back.
    """
    from tracescorer.commands.reads import reading

    settings = load(config_path)
    if unmatched and target:
        raise click.UsageError("--unmatched takes --trace, not an ID")
    when = parse_since(since) if since else None
    limit = limit or settings.store.query_max_rows

    async def show(reads: ReadStore) -> None:
        from tracescorer.commands.ids import resolve

        trace = (await resolve(reads, trace_id, ("trace",))).id if trace_id else None
        conversation = (await resolve(reads, conversation_id, ("conversation",))).id if conversation_id else None
        if unmatched:
            await _unmatched(reads, settings, trace, when, fmt, wide, limit)
            return
        run_id = None
        if target:
            run_id, trace, conversation = await _narrow(reads, target, run_id, trace, conversation)
        result = await reads.runs(
            trace_id=trace,
            conversation_id=conversation,
            since=when,
            run_id=run_id,
            newest_first=True,
            limit=limit,
        )
        _show_runs(result, fmt, wide, limit)

    reading(settings, show)


async def _unmatched(
    reads: ReadStore,
    settings: Settings,
    trace_id: str | None,
    when: dt.datetime | None,
    fmt: str,
    wide: bool,
    limit: int,
) -> None:
    from tracescorer.output import FORMATS, format_table

    result = await reads.unmatched_traces(trace_id=trace_id, since=when, newest_first=True, limit=limit)
    rows = list(reversed(result.rows))
    if fmt == "table":
        click.echo(format_table(result.columns, rows, wide=wide, wrap=("unmatched_reason",), types=result.types))
    else:
        click.echo(FORMATS[fmt](result.columns, rows))
    _truncated(result, limit)
    skipped = (await reads.skipped_traces_count(when)).dicts()
    if skipped and skipped[0]["traces"]:
        click.echo(
            f"# and {skipped[0]['traces']} trace(s) skipped by triage (no agent content): "
            "`tracescorer explain TRACE_ID`, or query the skipped_traces table",
            err=True,
        )
    if settings.store.backend == "postgres":
        click.echo("# traces assembled by this daemon only: in postgres mode span logs are per daemon", err=True)


def _show_runs(result: QueryResult, fmt: str, wide: bool, limit: int) -> None:
    from tracescorer.output import FORMATS, format_table
    from tracescorer.store import queries

    agent_runs = queries.agent_runs(list(reversed(result.rows)))
    if fmt == "jsonl":
        for run in agent_runs:
            click.echo(json.dumps(run.to_dict(), ensure_ascii=False, default=_jsonl_default))
    elif fmt == "json":
        click.echo(
            "["
            + ",\n".join(json.dumps(run.to_dict(), ensure_ascii=False, default=_jsonl_default) for run in agent_runs)
            + "]"
        )
    elif fmt == "csv":
        dicts = [json.loads(json.dumps(run.to_dict(), default=_jsonl_default)) for run in agent_runs]
        columns = list(dicts[0]) if dicts else _csv_columns()
        click.echo(FORMATS["csv"](columns, [[d[c] for c in columns] for d in dicts]))
    else:
        rows = [_row(run, wide) for run in agent_runs]  # input and answer folded below a run when narrow
        click.echo(format_table(_WIDE if wide else _NARROW, rows, wide=wide, wrap=("input", "output")))
    _truncated(result, limit)


async def _narrow(
    reads: ReadStore, target: str, run_id: str | None, trace_id: str | None, conversation_id: str | None
) -> tuple[str | None, str | None, str | None]:
    """The run, trace and conversation filters with ID's added."""
    from tracescorer.commands.ids import resolve, score_target

    ref = await resolve(reads, target)
    kind, value = ref.kind, ref.id
    if kind == "score":
        about = await score_target(reads, value)
        if about.conversation and about.conversation_id:
            kind, value = "conversation", about.conversation_id
        else:
            kind, value = "run", about.run_id or ""
    if kind == "trace":
        trace_id = value
    elif kind == "run":
        run_id = value
    else:
        conversation_id = value
    return run_id, trace_id, conversation_id


def _csv_columns() -> list[str]:
    import dataclasses

    from tracescorer.model import AgentRun

    return [f.name for f in dataclasses.fields(AgentRun)]


def _row(run: AgentRun, wide: bool) -> list[Any]:
    from tracescorer.commands.ids import short
    from tracescorer.output import stamp

    d = run.to_dict()
    user = _preview(d["input_messages"], "user", cut=not wide)
    answer = _preview(d["output"], "assistant", last=True, cut=not wide) or "(empty answer)"
    started = stamp(d["started_at"])
    if wide:
        return [
            run.run_id,
            run.trace_id,
            started,
            round((run.ended_at - run.started_at) / 1e9, 3),
            run.agent_name,
            run.service_name,
            run.conversation_id,
            run.convention,
            run.model,
            run.status,
            len(run.tool_calls),
            user,
            answer,
            run.error,
        ]
    return [
        short(run.run_id),
        short(run.trace_id),
        started,
        run.agent_name,
        run.conversation_id,
        run.status,
        len(run.tool_calls),
        user,
        answer,
    ]


def _truncated(result: QueryResult, limit: int) -> None:
    if result.truncated:
        click.echo(f"(the newest {limit} shown; older ones match too: --limit, --since or a filter)", err=True)
