"""``tracescorer runs``: the agent runs rebuilt from traces (table or AgentRun jsonl)."""

from __future__ import annotations

import base64
import json
from typing import Any

import click

from tracescorer.commands.common import (
    config_option,
    load,
    parse_since,
    row_limit,
    run_query,
    sql_str,
    time_literal,
    where_sql,
)
from tracescorer.output import format_table
from tracescorer.store.runs import RUN_SELECT, run_from_row


def _jsonl_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _preview(messages: list[dict[str, Any]], role: str, last: bool = False) -> str:
    texts = [m.get("content") or "" for m in messages if m.get("role") == role and m.get("content")]
    if not texts:
        return ""
    return texts[-1] if last else texts[0]


@click.command()
@config_option
@click.option("--trace", "trace_id", help="Only runs of this trace id.")
@click.option("--conversation", "conversation_id", help="Only runs of this conversation id.")
@click.option("--since", help="Only runs that started after this (30m, 2h, 7d or ISO 8601).")
@click.option("--unmatched", is_flag=True, help="List traces no convention could rebuild a run from, with the reason.")
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table", show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many (default: store.query_max_rows).")
def runs(config_path: str | None, trace_id: str | None, conversation_id: str | None, since: str | None,
         unmatched: bool, fmt: str, limit: int | None) -> None:
    """Agent runs rebuilt from the traces, oldest first."""
    settings = load(config_path)
    limit = row_limit(settings, limit)
    if unmatched:
        where = ["unmatched_reason IS NOT NULL"]
        if trace_id:
            where.append(f"trace_id = {sql_str(trace_id.lower())}")
        if since:
            where.append(f"assembled_at >= {time_literal(parse_since(since))}")
        sql = ("SELECT trace_id, assembled_at, service_name, root_name, span_count, unmatched_reason "
               f"FROM assembled_traces{where_sql(where)} ORDER BY assembled_at")
        result = run_query(settings, sql, limit)
        if fmt == "jsonl":
            for row in result["rows"]:
                click.echo(json.dumps(dict(zip(result["columns"], row)), default=str))
        else:
            click.echo(format_table(result["columns"], result["rows"]))
        return
    where = []
    if trace_id:
        where.append(f"trace_id = {sql_str(trace_id.lower())}")
    if conversation_id:
        where.append(f"conversation_id = {sql_str(conversation_id)}")
    if since:
        where.append(f"started_at >= {time_literal(parse_since(since))}")
    sql = RUN_SELECT + where_sql(where) + " ORDER BY started_at_unix_nano, run_id"
    result = run_query(settings, sql, limit)
    agent_runs = [run_from_row(row) for row in result["rows"]]
    if fmt == "jsonl":
        for run in agent_runs:
            click.echo(json.dumps(run.to_dict(), ensure_ascii=False, default=_jsonl_default))
    else:
        rows = []
        for run in agent_runs:
            d = run.to_dict()
            rows.append([
                run.run_id[:12], d["started_at"][:19], run.agent_name, run.conversation_id, run.convention,
                run.status, _preview(d["input_messages"], "user"), _preview(d["output"], "assistant", last=True),
                len(run.tool_calls),
            ])
        click.echo(format_table(["run", "started", "agent", "conversation", "convention", "status", "input",
                                 "output", "tools"], rows))
    if result["truncated"]:
        click.echo(f"(truncated at {limit} rows)", err=True)
