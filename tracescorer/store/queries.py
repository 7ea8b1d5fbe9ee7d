"""The SQL of the read commands (``runs``, ``scores``, ``explain``), as text.

Read commands send their SQL either to the daemon's query endpoint (which takes SQL text) or
run it on the file opened read-only, so every function here returns one SELECT statement with
its values as quoted literals (:func:`sql_str`); both paths pass it through the guard of
:mod:`tracescorer.store.duckdb.readonly`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from tracescorer.store.runs import RUN_SELECT

SCORE_SUMMARY_COLUMNS = (
    "updated_at, scorer_id, entity_type, coalesce(entity_id, '') AS agent, coalesce(conversation_id, '') AS "
    "conversation, trace_id, status, score, label, judge_cost_usd, reason, error"
)


def sql_str(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def time_literal(value: dt.datetime) -> str:
    return f"TIMESTAMPTZ {sql_str(value.isoformat())}"


def where_sql(clauses: Sequence[str]) -> str:
    """`` WHERE a AND b`` (empty when there are no clauses)."""
    return f" WHERE {' AND '.join(clauses)}" if clauses else ""


def runs(*, trace_id: str | None = None, conversation_id: str | None = None, since: dt.datetime | None = None) -> str:
    """Agent runs (the columns :func:`tracescorer.store.runs.run_from_row` reads), oldest first."""
    where = []
    if trace_id:
        where.append(f"trace_id = {sql_str(trace_id.lower())}")
    if conversation_id:
        where.append(f"conversation_id = {sql_str(conversation_id)}")
    if since:
        where.append(f"started_at >= {time_literal(since)}")
    return RUN_SELECT + where_sql(where) + " ORDER BY started_at_unix_nano, run_id"


def unmatched_traces(*, trace_id: str | None = None, since: dt.datetime | None = None) -> str:
    """Assembled traces no convention rebuilt a run from, with the reason."""
    where = ["unmatched_reason IS NOT NULL"]
    if trace_id:
        where.append(f"trace_id = {sql_str(trace_id.lower())}")
    if since:
        where.append(f"assembled_at >= {time_literal(since)}")
    return (
        "SELECT trace_id, assembled_at, service_name, root_name, span_count, unmatched_reason "
        f"FROM assembled_traces{where_sql(where)} ORDER BY assembled_at"
    )


def scores(
    *,
    scorer_id: str | None = None,
    since: dt.datetime | None = None,
    status: str | None = None,
    all_columns: bool = False,
) -> str:
    """Stored scores, oldest update first: the summary columns, or every column."""
    where = []
    if scorer_id:
        where.append(f"scorer_id = {sql_str(scorer_id)}")
    if since:
        where.append(f"updated_at >= {time_literal(since)}")
    if status:
        where.append(f"status = {sql_str(status)}")
    columns = "*" if all_columns else SCORE_SUMMARY_COLUMNS
    return f"SELECT {columns} FROM scores{where_sql(where)} ORDER BY updated_at, id"


def trace_runs(trace_id: str) -> str:
    return (
        "SELECT run_id, agent_name, conversation_id, convention, status FROM runs "
        f"WHERE trace_id = {sql_str(trace_id.lower())} ORDER BY started_at_unix_nano, run_id"
    )


def assembled_trace(trace_id: str) -> str:
    return (
        "SELECT reason, incomplete, span_count, unmatched_reason, assembled_at FROM assembled_traces "
        f"WHERE trace_id = {sql_str(trace_id.lower())}"
    )


def trace_spans_summary(trace_id: str) -> str:
    """Span count, first/last receipt and whether a root span arrived, for a trace not assembled yet."""
    return (
        "SELECT count(*) AS spans, min(received_at) AS first_received, max(received_at) AS last_received, "
        "count(*) FILTER (parent_span_id IS NULL OR parent_span_id = '') AS roots "
        f"FROM spans WHERE trace_id = {sql_str(trace_id.lower())}"
    )


def conversation_runs(conversation_id: str) -> str:
    """A conversation's runs with when each was last (re)written: the conversation's activity."""
    return (
        "SELECT run_id, agent_name, trace_id, updated_at FROM runs "
        f"WHERE conversation_id = {sql_str(conversation_id)} ORDER BY started_at_unix_nano, run_id"
    )


def decisions(targets: Sequence[tuple[str, str]]) -> str:
    """Latest decisions (with their score) for ``(target_type, target_id)`` pairs."""
    pairs = ", ".join(f"({sql_str(kind)}, {sql_str(target)})" for kind, target in targets) or "(NULL, NULL)"
    return (
        "SELECT d.target_type, d.target_id, d.scorer_id, d.decision, d.detail, d.sample_rate, d.source, "
        "d.decided_at, s.score, s.label, s.reason, s.judge_cost_usd FROM scoring_decisions d "
        "LEFT JOIN scores s ON s.id = d.score_id "
        f"WHERE (d.target_type, d.target_id) IN (VALUES {pairs})"
    )


def scores_count() -> str:
    return "SELECT count(*) AS n FROM scores"


def first_failed_trace() -> str:
    """The trace id of the first span with an error status (the demo explains it)."""
    return "SELECT trace_id FROM spans WHERE status_code = 'error' ORDER BY start_time_unix_nano LIMIT 1"
