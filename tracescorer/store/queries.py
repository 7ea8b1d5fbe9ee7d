"""The read commands' SQL (``runs``, ``scores``, ``explain``, ``monitors``, ``report``) by one name.

Each function returns a :class:`Query`: one SELECT with ``?`` parameters for every value that
comes from a user or the data (times as ISO 8601 text, cast in SQL). Each is a typed read of
:class:`tracescorer.store.reads.ReadStore` of the same name and arguments, which runs it on the
store's own readers (not the query path of users' SQL); read commands make that call through the
daemon's ops API or on the store directly. Written in the SQL DuckDB and PostgreSQL share
(``FILTER (WHERE …)``, ``EXTRACT(EPOCH FROM …)``, explicit GROUP BY, aliased subqueries), so
every command works in postgres mode too. Every query is bounded by its grouping or a ``limit``.

The ids, runs, scores, explain and monitors queries are here; the ``report`` command's are in
:mod:`tracescorer.store.report_queries`, and :class:`Query` with the pieces the SQL is built from in
:mod:`tracescorer.store.statement`. This module re-exports both, under ``__all__``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from tracescorer.model import AgentRun
from tracescorer.store.report_queries import (
    report_distribution,
    report_errors,
    report_summary,
    report_transcripts,
    report_trend,
    report_worst,
)
from tracescorer.store.runs import RUN_SELECT, run_from_row
from tracescorer.store.statement import SCORED_AT, TIME, Query, Where, about_clause, glob_clause

SCORE_SUMMARY_COLUMNS = (
    "updated_at, scorer_id, entity_type, entity_id AS agent, id, run_id, trace_id, conversation_id, status, score, "
    "label, judge_cost_usd, reason, error, target_ended_at, scorer_version"
)


# --- ids: what a trace, run, score or conversation id (or a prefix of one) names ----------------

#: The table and column of each kind of id (all but conversation ids are lower-case hex).
_ID_SOURCES = {"trace": ("runs", "trace_id"), "run": ("runs", "run_id"), "conversation": ("runs", "conversation_id")}
_ID_SOURCES["score"] = ("scores", "id")
ID_KINDS = tuple(_ID_SOURCES)


def _id_query(text: str, kinds: Sequence[str], clause: str, limit: int | None) -> Query:
    parts = [
        f"SELECT DISTINCT '{kind}' AS kind, {column} AS id FROM {table} WHERE {clause.format(column)}"
        for kind in kinds
        for table, column in (_ID_SOURCES[kind],)
    ]
    params = tuple(text if kind == "conversation" else text.lower() for kind in kinds)
    return Query(f"SELECT kind, id FROM ({' UNION ALL '.join(parts)}) AS ids ORDER BY kind, id", params, limit)


def ids_equal(text: str, kinds: Sequence[str] = ID_KINDS, limit: int | None = None) -> Query:
    """The stored ids of these kinds equal to ``text`` (through the key indexes)."""
    return _id_query(text, kinds, "{} = ?", limit)


def ids_starting(text: str, kinds: Sequence[str] = ID_KINDS, limit: int | None = None) -> Query:
    """The stored ids of these kinds that start with ``text``."""
    return _id_query(text, kinds, "starts_with({}, ?)", limit)


def assembled_trace_ids(text: str, limit: int | None = None) -> Query:
    """Trace ids of the span log's assembled traces (those no run came from too) and of the traces
    triage skipped, starting with ``text``."""
    return Query(
        "SELECT trace_id FROM assembled_traces WHERE starts_with(trace_id, ?) UNION "
        "SELECT trace_id FROM skipped_traces WHERE starts_with(trace_id, ?) ORDER BY trace_id",
        (text.lower(), text.lower()),
        limit,
    )


def skipped_trace(trace_id: str) -> Query:
    """What triage skipped of a trace: requests, spans, log records, services, first and last receipt."""
    return Query(
        "SELECT count(*) AS requests, coalesce(sum(span_count), 0) AS spans, coalesce(sum(log_count), 0) AS logs, "
        "string_agg(DISTINCT service_name, ', ') AS services, min(received_at) AS first_received, "
        "max(received_at) AS last_received FROM skipped_traces WHERE trace_id = ?",
        (trace_id.lower(),),
    )


def skipped_traces_count(since: dt.datetime | None) -> Query:
    """Distinct traces triage skipped (since ``since``)."""
    where = Where()
    if since:
        where.add(f"received_at >= {TIME}", since.isoformat())
    return Query(f"SELECT count(DISTINCT trace_id) AS traces FROM skipped_traces{where.sql()}", tuple(where.params))


def score_target(score_id: str) -> Query:
    """What a score is about: its entity type and ids."""
    return Query(
        "SELECT id, scorer_id, entity_type, run_id, trace_id, conversation_id FROM scores WHERE id = ?", (score_id,)
    )


_RUN_KEYS = {"trace": "trace_id", "run": "run_id", "conversation": "conversation_id"}


def runs_of(kind: str, target_id: str) -> Query:
    """The run, trace and conversation ids of the runs of a trace, a run or a conversation."""
    return Query(
        f"SELECT run_id, trace_id, conversation_id FROM runs WHERE {_RUN_KEYS[kind]} = ? "
        "ORDER BY started_at_unix_nano, run_id",
        (target_id,),
    )


# --- runs, scores, explain ----------------------------------------------------------------------


def runs(
    *,
    trace_id: str | None = None,
    conversation_id: str | None = None,
    since: dt.datetime | None = None,
    run_id: str | None = None,
    newest_first: bool = False,
    limit: int | None = None,
) -> Query:
    """Agent runs (the rows :func:`agent_runs` turns into runs), oldest first (``newest_first``: so
    that ``limit`` keeps the newest)."""
    where = Where()
    if trace_id:
        where.add("trace_id = ?", trace_id.lower())
    if run_id:
        where.add("run_id = ?", run_id.lower())
    if conversation_id:
        where.add("conversation_id = ?", conversation_id)
    if since:
        where.add(f"started_at >= {TIME}", since.isoformat())
    order = " DESC" if newest_first else ""
    return Query(
        RUN_SELECT + where.sql() + f" ORDER BY started_at_unix_nano{order}, run_id{order}", tuple(where.params), limit
    )


def agent_runs(rows: Sequence[Sequence[object]]) -> list[AgentRun]:
    """The runs of a :func:`runs` query's rows."""
    return [run_from_row(row) for row in rows]


def unmatched_traces(
    *,
    trace_id: str | None = None,
    since: dt.datetime | None = None,
    newest_first: bool = False,
    limit: int | None = None,
) -> Query:
    """Assembled traces no convention rebuilt a run from, with the reason, oldest first (or newest)."""
    where = Where("unmatched_reason IS NOT NULL")
    if trace_id:
        where.add("trace_id = ?", trace_id.lower())
    if since:
        where.add(f"assembled_at >= {TIME}", since.isoformat())
    return Query(
        "SELECT trace_id, assembled_at, service_name, root_name, span_count, unmatched_reason "
        f"FROM assembled_traces{where.sql()} ORDER BY assembled_at{' DESC' if newest_first else ''}",
        tuple(where.params),
        limit,
    )


def scores(
    *,
    scorer_id: str | None = None,
    since: dt.datetime | None = None,
    status: str | None = None,
    label: str | None = None,
    agent: str | None = None,
    about: tuple[str, str] | None = None,
    all_columns: bool = False,
    limit: int | None = None,
) -> Query:
    """Stored scores, newest update first (``limit`` keeps the newest): the summary columns,
    or every column. ``about`` is ``(kind, id)`` of a trace, run, conversation or score;
    ``agent`` a name or a ``*`` pattern."""
    where = Where()
    if scorer_id:
        where.add("scorer_id = ?", scorer_id)
    if since:
        where.add(f"updated_at >= {TIME}", since.isoformat())
    if status:
        where.add("status = ?", status)
    if label:
        where.add("label = ?", label)
    if agent:
        where.add(*glob_clause("entity_id", agent))
    if about:
        clause, params = about_clause(*about, type_column="entity_type", conversation_column="conversation_id")
        where.add(clause, *params)
    columns = "*" if all_columns else SCORE_SUMMARY_COLUMNS
    return Query(
        f"SELECT {columns} FROM scores{where.sql()} ORDER BY updated_at DESC, id DESC", tuple(where.params), limit
    )


def trace_runs(trace_id: str) -> Query:
    """A trace's runs: id, agent, conversation, convention, status."""
    return Query(
        "SELECT run_id, agent_name, conversation_id, convention, status FROM runs "
        "WHERE trace_id = ? ORDER BY started_at_unix_nano, run_id",
        (trace_id.lower(),),
    )


def assembled_trace(trace_id: str) -> Query:
    """A trace's assembly record: why it was assembled, span count, why no run came from it."""
    return Query(
        "SELECT reason, incomplete, span_count, unmatched_reason, assembled_at FROM assembled_traces WHERE trace_id = ?",
        (trace_id.lower(),),
    )


def trace_spans_summary(trace_id: str) -> Query:
    """Span count, first/last receipt and whether a root span arrived, for a trace not assembled yet."""
    return Query(
        "SELECT count(*) AS spans, min(received_at) AS first_received, max(received_at) AS last_received, "
        "count(*) FILTER (WHERE parent_span_id IS NULL OR parent_span_id = '') AS roots "
        "FROM spans WHERE trace_id = ?",
        (trace_id.lower(),),
    )


def conversation_runs(conversation_id: str) -> Query:
    """A conversation's runs with when each was last (re)written: the conversation's activity."""
    return Query(
        "SELECT run_id, agent_name, trace_id, updated_at FROM runs "
        "WHERE conversation_id = ? ORDER BY started_at_unix_nano, run_id",
        (conversation_id,),
    )


def decisions(targets: Sequence[tuple[str, str]]) -> Query:
    """Latest decisions (with their score) for ``(target_type, target_id)`` pairs."""
    pairs = ", ".join(["(?, ?)"] * len(targets)) or "(NULL, NULL)"
    return Query(
        "SELECT d.target_type, d.target_id, d.scorer_id, d.decision, d.detail, d.sample_rate, d.source, "
        "d.decided_at, s.score, s.label, s.reason, s.judge_cost_usd, s.scorer_version, s.status, s.error_type, "
        "s.error_class, s.heal_attempts, s.judge_reused, s.judge_model, s.created_at AS score_created_at, "
        "s.updated_at AS score_updated_at "
        "FROM scoring_decisions d "
        "LEFT JOIN scores s ON s.id = d.score_id "
        f"WHERE (d.target_type, d.target_id) IN (VALUES {pairs})",
        tuple(value for pair in targets for value in pair),
    )


def scores_count() -> Query:
    """Stored scores (the demo counts them)."""
    return Query("SELECT count(*) AS n FROM scores")


def first_failed_trace() -> Query:
    """The trace id of the first span with an error status (the demo explains it)."""
    return Query("SELECT trace_id FROM spans WHERE status_code = 'error' ORDER BY start_time_unix_nano LIMIT 1")


# --- monitors ---------------------------------------------------------------------------------------


def monitor_tables() -> Query:
    """Which of the monitors' tables the store has (a file from before them, read offline, has not)."""
    return Query(
        "SELECT table_name FROM information_schema.tables WHERE table_name IN ('monitor_state', 'monitor_events')"
    )


def monitor_states() -> Query:
    """Every column: a file from before a schema upgrade is read as it is (the command reads by name)."""
    return Query("SELECT * FROM monitor_state ORDER BY monitor_id")


def monitor_events(monitor_id: str | None = None, limit: int | None = None) -> Query:
    """Monitor events, newest first."""
    where = Where()
    if monitor_id is not None:
        where.add("monitor_id = ?", monitor_id)
    return Query(
        "SELECT event_at, monitor_id, event, state, value, samples, target, detail FROM monitor_events"
        f"{where.sql()} ORDER BY event_at DESC",
        tuple(where.params),
        limit,
    )


__all__ = [
    "ID_KINDS",
    "SCORED_AT",
    "SCORE_SUMMARY_COLUMNS",
    "Query",
    "agent_runs",
    "assembled_trace",
    "assembled_trace_ids",
    "conversation_runs",
    "decisions",
    "first_failed_trace",
    "glob_clause",
    "ids_equal",
    "ids_starting",
    "monitor_events",
    "monitor_states",
    "monitor_tables",
    "report_distribution",
    "report_errors",
    "report_summary",
    "report_transcripts",
    "report_trend",
    "report_worst",
    "runs",
    "runs_of",
    "score_target",
    "scores",
    "scores_count",
    "skipped_trace",
    "skipped_traces_count",
    "trace_runs",
    "unmatched_traces",
]
