"""``tracescorer runs``: the agent runs rebuilt from traces (table, JSON array or AgentRun jsonl)."""

from __future__ import annotations

import base64
import json
from typing import Any

import click

from tracescorer.commands.common import config_option, load, parse_since, row_limit, run_query


def _jsonl_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _preview(messages: list[dict[str, Any]], role: str, last: bool = False) -> str:
    texts = [m.get("content") or "" for m in messages if m.get("role") == role and m.get("content")]
    if not texts:
        return ""
    return texts[-1] if last else texts[0]


_NARROW = ["run", "started", "agent", "conversation", "status", "input", "output", "tools"]
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
    "input",
    "output",
    "tools",
    "error",
]


@click.command()
@config_option
@click.option("--trace", "trace_id", help="Only runs of this trace id.")
@click.option("--conversation", "conversation_id", help="Only runs of this conversation id.")
@click.option("--since", help="Only runs that started after this (30m, 2h, 7d or ISO 8601).")
@click.option("--unmatched", is_flag=True, help="List traces no convention could rebuild a run from, with the reason.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "jsonl"]),
    default="table",
    show_default=True,
    help="jsonl: one AgentRun object per line (the AgentRun contract); json: one array of them.",
)
@click.option("--wide", is_flag=True, help="Tables: more columns (ids, convention, model, error), cells in full.")
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="At most this many (default: store.query_max_rows)."
)
def runs(
    config_path: str | None,
    trace_id: str | None,
    conversation_id: str | None,
    since: str | None,
    unmatched: bool,
    fmt: str,
    wide: bool,
    limit: int | None,
) -> None:
    """Agent runs rebuilt from the traces, oldest first."""
    from tracescorer.output import FORMATS, format_table
    from tracescorer.store import queries

    settings = load(config_path)
    limit = row_limit(settings, limit)
    when = parse_since(since) if since else None
    if unmatched:
        result = run_query(settings, queries.unmatched_traces(trace_id=trace_id, since=when), limit)
        if fmt == "table":
            click.echo(format_table(result["columns"], result["rows"], wide=wide, wrap=("unmatched_reason",)))
        else:
            click.echo(FORMATS[fmt](result["columns"], result["rows"]))
        _truncated(result, limit)
        if settings.store.backend == "postgres":
            click.echo("# traces assembled by this daemon only: in postgres mode span logs are per daemon", err=True)
        return
    result = run_query(settings, queries.runs(trace_id=trace_id, conversation_id=conversation_id, since=when), limit)
    from tracescorer.store.runs import run_from_row

    agent_runs = [run_from_row(row) for row in result["rows"]]
    if fmt == "jsonl":
        for run in agent_runs:
            click.echo(json.dumps(run.to_dict(), ensure_ascii=False, default=_jsonl_default))
    elif fmt == "json":
        click.echo(
            "["
            + ",\n".join(json.dumps(run.to_dict(), ensure_ascii=False, default=_jsonl_default) for run in agent_runs)
            + "]"
        )
    else:
        rows = []
        for run in agent_runs:
            d = run.to_dict()
            user, answer = _preview(d["input_messages"], "user"), _preview(d["output"], "assistant", last=True)
            if wide:
                rows.append(
                    [
                        run.run_id,
                        run.trace_id,
                        d["started_at"][:23],
                        round((run.ended_at - run.started_at) / 1e9, 3),
                        run.agent_name,
                        run.service_name,
                        run.conversation_id,
                        run.convention,
                        run.model,
                        run.status,
                        user,
                        answer,
                        len(run.tool_calls),
                        run.error,
                    ]
                )
            else:
                rows.append(
                    [
                        run.run_id[:12],
                        d["started_at"][5:19].replace("T", " "),
                        run.agent_name,
                        run.conversation_id,
                        run.status,
                        user,
                        answer,
                        len(run.tool_calls),
                    ]
                )
        click.echo(format_table(_WIDE if wide else _NARROW, rows, wide=wide))
    _truncated(result, limit)


def _truncated(result: dict[str, Any], limit: int) -> None:
    if result["truncated"]:
        click.echo(f"(truncated at {limit} rows)", err=True)
