"""The ``report`` command's SQL: per-scorer summary, trend, distribution, the worst scores, the
latest errors, and the runs behind the scores shown. Like :mod:`tracescorer.store.queries` (which
re-exports these): one SELECT per function, ``?`` parameters, SQL that DuckDB and PostgreSQL share,
every query bounded by its grouping or a limit. Scores are placed in time by
:data:`~tracescorer.store.statement.SCORED_AT`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from tracescorer.store.statement import SCORED_AT, TIME, Query, Where, placeholders


def _scores_where(since: dt.datetime, scorer_id: str | None, extra: str = "") -> Where:
    where = Where()
    where.add(f"{SCORED_AT} >= {TIME}", since.isoformat())
    if scorer_id is not None:
        where.add("scorer_id = ?", scorer_id)
    if extra:
        where.add(extra)
    return where


def report_summary(since: dt.datetime, scorer_id: str | None) -> Query:
    """One row per scorer: counts by status and label, mean, range, cost, first/last scored time,
    and the p50/p99 time to score of its live scores (seconds from the target's end to the row's
    first store)."""
    where = _scores_where(since, scorer_id)
    return Query(
        "SELECT scorer_id, min(scorer_name) AS scorer_name, count(*) AS n, "
        "count(*) FILTER (WHERE status = 'ok') AS ok, count(*) FILTER (WHERE status = 'error') AS errors, "
        "count(*) FILTER (WHERE status = 'not_scorable') AS not_scorable, "
        "avg(score) FILTER (WHERE status = 'ok') AS mean, "
        "min(score) FILTER (WHERE status = 'ok') AS lo, max(score) FILTER (WHERE status = 'ok') AS hi, "
        "count(*) FILTER (WHERE label = 'pass') AS passed, count(*) FILTER (WHERE label = 'fail') AS failed, "
        "coalesce(sum(judge_cost_usd), 0) AS cost_usd, max(threshold) AS threshold, "
        f"count(*) FILTER (WHERE source = 'backfill') AS backfill, min({SCORED_AT}) AS first_at, "
        f"max({SCORED_AT}) AS last_at, {_time_to_score(0.5)} AS time_to_score_p50, "
        f"{_time_to_score(0.99)} AS time_to_score_p99 FROM scores{where.sql()} GROUP BY scorer_id ORDER BY scorer_id",
        tuple(where.params),
    )


def _time_to_score(q: float) -> str:
    return (
        f"percentile_cont({q}) WITHIN GROUP (ORDER BY CAST(EXTRACT(EPOCH FROM created_at - target_ended_at) "
        "AS DOUBLE PRECISION)) FILTER (WHERE source = 'live' AND target_ended_at IS NOT NULL)"
    )


def report_trend(since: dt.datetime, scorer_id: str | None, bucket_s: int) -> Query:
    """Per scorer and time bucket of the scored time (epoch seconds of its start): count, mean,
    pass/fail, errors."""
    where = _scores_where(since, scorer_id)
    bucket = int(bucket_s)
    return Query(
        f"SELECT scorer_id, (floor(EXTRACT(EPOCH FROM {SCORED_AT}) / {bucket}) * {bucket})::BIGINT "
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


_TARGET_COLUMNS = (
    "scorer_id, id, entity_type, entity_id, conversation_id, trace_id, span_id, run_id, status, score, label, "
    f"threshold, reason, error, error_type, {SCORED_AT} AS scored_at"
)


def _ranked(where: Where, order: str, per_scorer: int) -> Query:
    inner = (
        f"SELECT {_TARGET_COLUMNS}, row_number() OVER (PARTITION BY scorer_id ORDER BY {order}) AS rank "
        f"FROM scores{where.sql()}"
    )
    return Query(
        f"SELECT * FROM ({inner}) AS ranked WHERE rank <= {int(per_scorer)} ORDER BY scorer_id, rank",
        tuple(where.params),
    )


def report_worst(since: dt.datetime, scorer_id: str | None, per_scorer: int) -> Query:
    """Per scorer the ``per_scorer`` lowest ok scores that did not pass (failures, or every score
    of a scorer without a threshold), most recent first among equals."""
    where = _scores_where(
        since, scorer_id, "status = 'ok' AND score IS NOT NULL AND (label IS NULL OR label <> 'pass')"
    )
    return _ranked(where, f"score ASC, {SCORED_AT} DESC, id", per_scorer)


def report_errors(since: dt.datetime, scorer_id: str | None, per_scorer: int) -> Query:
    """Per scorer its ``per_scorer`` most recent errors."""
    return _ranked(_scores_where(since, scorer_id, "status = 'error'"), f"{SCORED_AT} DESC, id", per_scorer)


def report_transcripts(run_ids: Sequence[str], conversation_ids: Sequence[str], runs_per_conversation: int) -> Query:
    """The runs behind the scores shown: each run-scope target (``part`` run) and the latest runs
    of each conversation-scope target (``part`` conversation), by start time."""
    columns = "run_id, trace_id, conversation_id, agent_name, started_at_unix_nano, input_messages, output, tool_calls"
    parts = []
    if run_ids:
        parts.append(f"SELECT 'run' AS part, {columns} FROM runs WHERE run_id IN ({placeholders(len(run_ids))})")
    if conversation_ids:
        parts.append(
            f"SELECT 'conversation' AS part, {columns} FROM (SELECT {columns}, row_number() OVER (PARTITION BY "
            "conversation_id ORDER BY started_at_unix_nano DESC) AS recent FROM runs WHERE conversation_id IN "
            f"({placeholders(len(conversation_ids))})) AS latest WHERE recent <= {int(runs_per_conversation)}"
        )
    union = " UNION ALL ".join(parts) or f"SELECT 'run' AS part, {columns} FROM runs WHERE FALSE"
    return Query(f"SELECT * FROM ({union}) AS shown ORDER BY part, started_at_unix_nano", (*run_ids, *conversation_ids))
