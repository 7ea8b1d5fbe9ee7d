"""Every read command's SQL (``runs``, ``scores``, ``explain``, ``monitors``, ``report``), in one place.

Each function returns a :class:`Query`: one SELECT with ``?`` parameters for every value that
comes from a user or the data (times travel as ISO 8601 text, cast in SQL, so a query crosses
the daemon's JSON query endpoint unchanged). Read commands run them through the daemon's query
endpoint or on the store directly (:func:`tracescorer.commands.common.run_query`); both paths
pass them through the read-only guard. Written in the SQL DuckDB and PostgreSQL share
(``FILTER (WHERE …)``, ``EXTRACT(EPOCH FROM …)``, explicit GROUP BY, aliased subqueries), so
every command works in postgres mode too. Every query is bounded by its grouping or a limit.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tracescorer.store.runs import RUN_SELECT


@dataclass(frozen=True, slots=True)
class Query:
    """One read-only statement and its ``?`` parameters (JSON scalars)."""

    sql: str
    params: tuple[Any, ...] = ()


_TIME = "CAST(? AS TIMESTAMPTZ)"

SCORE_SUMMARY_COLUMNS = (
    "updated_at, scorer_id, entity_type, coalesce(entity_id, '') AS agent, coalesce(conversation_id, '') AS "
    "conversation, trace_id, status, score, label, judge_cost_usd, reason, error, scorer_version"
)


class _Where:
    """Clauses joined by AND, with their parameters in order."""

    def __init__(self, *clauses: str) -> None:
        self.clauses = list(clauses)
        self.params: list[Any] = []

    def add(self, clause: str, *params: Any) -> None:
        self.clauses.append(clause)
        self.params += params

    def sql(self) -> str:
        return f" WHERE {' AND '.join(self.clauses)}" if self.clauses else ""


def _placeholders(n: int) -> str:
    return ", ".join(["?"] * n)


# --- runs, scores, explain ----------------------------------------------------------------------


def runs(*, trace_id: str | None = None, conversation_id: str | None = None, since: dt.datetime | None = None) -> Query:
    """Agent runs (the columns :func:`tracescorer.store.runs.run_from_row` reads), oldest first."""
    where = _Where()
    if trace_id:
        where.add("trace_id = ?", trace_id.lower())
    if conversation_id:
        where.add("conversation_id = ?", conversation_id)
    if since:
        where.add(f"started_at >= {_TIME}", since.isoformat())
    return Query(RUN_SELECT + where.sql() + " ORDER BY started_at_unix_nano, run_id", tuple(where.params))


def unmatched_traces(*, trace_id: str | None = None, since: dt.datetime | None = None) -> Query:
    """Assembled traces no convention rebuilt a run from, with the reason."""
    where = _Where("unmatched_reason IS NOT NULL")
    if trace_id:
        where.add("trace_id = ?", trace_id.lower())
    if since:
        where.add(f"assembled_at >= {_TIME}", since.isoformat())
    return Query(
        "SELECT trace_id, assembled_at, service_name, root_name, span_count, unmatched_reason "
        f"FROM assembled_traces{where.sql()} ORDER BY assembled_at",
        tuple(where.params),
    )


def scores(
    *,
    scorer_id: str | None = None,
    since: dt.datetime | None = None,
    status: str | None = None,
    all_columns: bool = False,
) -> Query:
    """Stored scores, oldest update first: the summary columns, or every column."""
    where = _Where()
    if scorer_id:
        where.add("scorer_id = ?", scorer_id)
    if since:
        where.add(f"updated_at >= {_TIME}", since.isoformat())
    if status:
        where.add("status = ?", status)
    columns = "*" if all_columns else SCORE_SUMMARY_COLUMNS
    return Query(f"SELECT {columns} FROM scores{where.sql()} ORDER BY updated_at, id", tuple(where.params))


def trace_runs(trace_id: str) -> Query:
    return Query(
        "SELECT run_id, agent_name, conversation_id, convention, status FROM runs "
        "WHERE trace_id = ? ORDER BY started_at_unix_nano, run_id",
        (trace_id.lower(),),
    )


def assembled_trace(trace_id: str) -> Query:
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
        "d.decided_at, s.score, s.label, s.reason, s.judge_cost_usd, s.scorer_version FROM scoring_decisions d "
        "LEFT JOIN scores s ON s.id = d.score_id "
        f"WHERE (d.target_type, d.target_id) IN (VALUES {pairs})",
        tuple(value for pair in targets for value in pair),
    )


def scores_count() -> Query:
    return Query("SELECT count(*) AS n FROM scores")


def first_failed_trace() -> Query:
    """The trace id of the first span with an error status (the demo explains it)."""
    return Query("SELECT trace_id FROM spans WHERE status_code = 'error' ORDER BY start_time_unix_nano LIMIT 1")


# --- monitors ---------------------------------------------------------------------------------------

MONITOR_TABLES = Query(
    "SELECT table_name FROM information_schema.tables WHERE table_name IN ('monitor_state', 'monitor_events')"
)

MONITOR_STATES = Query(
    "SELECT monitor_id, state, since, value, samples, evaluated_at, notified_at, pending "
    "FROM monitor_state ORDER BY monitor_id"
)


def monitor_events(monitor_id: str | None = None) -> Query:
    where = _Where()
    if monitor_id is not None:
        where.add("monitor_id = ?", monitor_id)
    return Query(
        "SELECT event_at, monitor_id, event, state, value, samples, target, detail FROM monitor_events"
        f"{where.sql()} ORDER BY event_at DESC",
        tuple(where.params),
    )


# --- report -----------------------------------------------------------------------------------------


def _scores_where(since: dt.datetime, scorer_id: str | None, extra: str = "") -> _Where:
    where = _Where()
    where.add(f"updated_at >= {_TIME}", since.isoformat())
    if scorer_id is not None:
        where.add("scorer_id = ?", scorer_id)
    if extra:
        where.add(extra)
    return where


def report_summary(since: dt.datetime, scorer_id: str | None) -> Query:
    """One row per scorer: counts by status and label, mean, range, cost, first/last score."""
    where = _scores_where(since, scorer_id)
    return Query(
        "SELECT scorer_id, min(scorer_name) AS scorer_name, count(*) AS n, "
        "count(*) FILTER (WHERE status = 'ok') AS ok, count(*) FILTER (WHERE status = 'error') AS errors, "
        "count(*) FILTER (WHERE status = 'not_scorable') AS not_scorable, "
        "avg(score) FILTER (WHERE status = 'ok') AS mean, "
        "min(score) FILTER (WHERE status = 'ok') AS lo, max(score) FILTER (WHERE status = 'ok') AS hi, "
        "count(*) FILTER (WHERE label = 'pass') AS passed, count(*) FILTER (WHERE label = 'fail') AS failed, "
        "coalesce(sum(judge_cost_usd), 0) AS cost_usd, max(threshold) AS threshold, "
        "count(*) FILTER (WHERE source = 'backfill') AS backfill, min(updated_at) AS first_at, "
        f"max(updated_at) AS last_at FROM scores{where.sql()} GROUP BY scorer_id ORDER BY scorer_id",
        tuple(where.params),
    )


def report_trend(since: dt.datetime, scorer_id: str | None, bucket_s: int) -> Query:
    """Per scorer and time bucket (epoch seconds of its start): count, mean, pass/fail, errors."""
    where = _scores_where(since, scorer_id)
    bucket = int(bucket_s)
    return Query(
        f"SELECT scorer_id, (floor(EXTRACT(EPOCH FROM updated_at) / {bucket}) * {bucket})::BIGINT "
        "AS bucket, count(*) AS n, avg(score) FILTER (WHERE status = 'ok') AS mean, "
        "count(*) FILTER (WHERE label = 'pass') AS passed, count(*) FILTER (WHERE label = 'fail') AS failed, "
        "count(*) FILTER (WHERE status = 'error') AS errors "
        f"FROM scores{where.sql()} GROUP BY 1, 2 ORDER BY scorer_id, bucket",
        tuple(where.params),
    )


def report_distribution(since: dt.datetime, scorer_id: str | None, bins: int) -> Query:
    """Per scorer: ``bins`` equal bins over [min(0, lowest), max(1, highest)] of its ok scores."""
    where = _scores_where(since, scorer_id, "status = 'ok' AND score IS NOT NULL")
    last = int(bins) - 1
    return Query(
        f"WITH s AS (SELECT scorer_id, score FROM scores{where.sql()}), "
        "r AS (SELECT scorer_id, least(0, min(score)) AS lo, greatest(1, max(score)) AS hi "
        "FROM s GROUP BY scorer_id) "
        f"SELECT s.scorer_id, least({last}, floor((s.score - r.lo) / (r.hi - r.lo) * {last + 1}))::INTEGER AS bin, "
        "count(*) AS n, min(r.lo) AS lo, min(r.hi) AS hi FROM s JOIN r USING (scorer_id) "
        "GROUP BY 1, 2 ORDER BY 1, 2",
        tuple(where.params),
    )


def report_worst(since: dt.datetime, scorer_id: str | None, per_scorer: int) -> Query:
    """Per scorer the ``per_scorer`` lowest ok scores (then errors), newest first among equals."""
    where = _scores_where(since, scorer_id, "status IN ('ok', 'error')")
    inner = (
        "SELECT scorer_id, id, entity_type, entity_id, conversation_id, trace_id, run_id, status, score, label, "
        "threshold, reason, error, updated_at, row_number() OVER (PARTITION BY scorer_id ORDER BY "
        "CASE WHEN status = 'ok' THEN 0 ELSE 1 END, score ASC NULLS LAST, updated_at DESC, id) AS rank "
        f"FROM scores{where.sql()}"
    )
    return Query(
        f"SELECT * FROM ({inner}) AS ranked WHERE rank <= {int(per_scorer)} ORDER BY scorer_id, rank",
        tuple(where.params),
    )


def report_transcripts(run_ids: Sequence[str], conversation_ids: Sequence[str], runs_per_conversation: int) -> Query:
    """The runs behind the worst scores: each run-scope target, and the latest runs of each
    conversation-scope target."""
    clauses = []
    if run_ids:
        clauses.append(f"run_id IN ({_placeholders(len(run_ids))})")
    if conversation_ids:
        clauses.append(f"conversation_id IN ({_placeholders(len(conversation_ids))})")
    where = " OR ".join(clauses) or "FALSE"
    inner = (
        "SELECT run_id, conversation_id, agent_name, started_at_unix_nano, input_messages, output, "
        "row_number() OVER (PARTITION BY coalesce(conversation_id, run_id) ORDER BY started_at_unix_nano DESC) "
        f"AS recent FROM runs WHERE {where}"
    )
    return Query(
        f"SELECT run_id, conversation_id, agent_name, started_at_unix_nano, input_messages, output FROM ({inner}) "
        f"AS latest WHERE recent <= {int(runs_per_conversation)} ORDER BY conversation_id, started_at_unix_nano",
        (*run_ids, *conversation_ids),
    )
