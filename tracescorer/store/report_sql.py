"""SQL text for ``tracescorer report`` (read-only; runs through the daemon's query endpoint, which
takes text, or on the file opened read-only). Every query is bounded by its grouping or a limit.

Written in the SQL DuckDB and PostgreSQL share (``FILTER (WHERE …)``, ``EXTRACT(EPOCH FROM …)``,
explicit GROUP BY, aliased subqueries), so the report works in postgres mode too."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence


def _str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _where(since: dt.datetime, scorer_id: str | None, extra: str = "") -> str:
    clauses = [f"updated_at >= TIMESTAMPTZ {_str(since.isoformat())}"]
    if scorer_id is not None:
        clauses.append(f"scorer_id = {_str(scorer_id)}")
    if extra:
        clauses.append(extra)
    return " WHERE " + " AND ".join(clauses)


def summary_sql(since: dt.datetime, scorer_id: str | None) -> str:
    """One row per scorer: counts by status and label, mean, range, cost, first/last score."""
    return (
        "SELECT scorer_id, min(scorer_name) AS scorer_name, count(*) AS n, "
        "count(*) FILTER (WHERE status = 'ok') AS ok, count(*) FILTER (WHERE status = 'error') AS errors, "
        "count(*) FILTER (WHERE status = 'not_scorable') AS not_scorable, "
        "avg(score) FILTER (WHERE status = 'ok') AS mean, "
        "min(score) FILTER (WHERE status = 'ok') AS lo, max(score) FILTER (WHERE status = 'ok') AS hi, "
        "count(*) FILTER (WHERE label = 'pass') AS passed, count(*) FILTER (WHERE label = 'fail') AS failed, "
        "coalesce(sum(judge_cost_usd), 0) AS cost_usd, max(threshold) AS threshold, "
        "count(*) FILTER (WHERE source = 'backfill') AS backfill, min(updated_at) AS first_at, "
        f"max(updated_at) AS last_at FROM scores{_where(since, scorer_id)} GROUP BY scorer_id ORDER BY scorer_id"
    )


def trend_sql(since: dt.datetime, scorer_id: str | None, bucket_s: int) -> str:
    """Per scorer and time bucket (epoch seconds of its start): count, mean, pass/fail, errors."""
    return (
        f"SELECT scorer_id, (floor(EXTRACT(EPOCH FROM updated_at) / {int(bucket_s)}) * {int(bucket_s)})::BIGINT "
        "AS bucket, count(*) AS n, avg(score) FILTER (WHERE status = 'ok') AS mean, "
        "count(*) FILTER (WHERE label = 'pass') AS passed, count(*) FILTER (WHERE label = 'fail') AS failed, "
        "count(*) FILTER (WHERE status = 'error') AS errors "
        f"FROM scores{_where(since, scorer_id)} GROUP BY 1, 2 ORDER BY scorer_id, bucket"
    )


def distribution_sql(since: dt.datetime, scorer_id: str | None, bins: int) -> str:
    """Per scorer: ``bins`` equal bins over [min(0, lowest), max(1, highest)] of its ok scores."""
    ok = "status = 'ok' AND score IS NOT NULL"
    scores = f"SELECT scorer_id, score FROM scores{_where(since, scorer_id, ok)}"
    return (
        f"WITH s AS ({scores}), r AS (SELECT scorer_id, least(0, min(score)) AS lo, greatest(1, max(score)) AS hi "
        "FROM s GROUP BY scorer_id) "
        f"SELECT s.scorer_id, least({bins - 1}, floor((s.score - r.lo) / (r.hi - r.lo) * {bins}))::INTEGER AS bin, "
        "count(*) AS n, min(r.lo) AS lo, min(r.hi) AS hi FROM s JOIN r USING (scorer_id) "
        "GROUP BY 1, 2 ORDER BY 1, 2"
    )


_SCORED = "status IN ('ok', 'error')"


def worst_sql(since: dt.datetime, scorer_id: str | None, per_scorer: int) -> str:
    """Per scorer the ``per_scorer`` lowest ok scores (then errors), newest first among equals."""
    inner = (
        "SELECT scorer_id, id, entity_type, entity_id, conversation_id, trace_id, run_id, status, score, label, "
        "threshold, reason, error, updated_at, row_number() OVER (PARTITION BY scorer_id ORDER BY "
        "CASE WHEN status = 'ok' THEN 0 ELSE 1 END, score ASC NULLS LAST, updated_at DESC, id) AS rank "
        f"FROM scores{_where(since, scorer_id, _SCORED)}"
    )
    return f"SELECT * FROM ({inner}) AS ranked WHERE rank <= {int(per_scorer)} ORDER BY scorer_id, rank"


def transcripts_sql(run_ids: Sequence[str], conversation_ids: Sequence[str], runs_per_conversation: int) -> str:
    """The runs behind the worst scores: each run-scope target, and the latest runs of each
    conversation-scope target."""
    clauses = []
    if run_ids:
        clauses.append(f"run_id IN ({', '.join(_str(r) for r in run_ids)})")
    if conversation_ids:
        clauses.append(f"conversation_id IN ({', '.join(_str(c) for c in conversation_ids)})")
    where = " OR ".join(clauses) or "FALSE"
    inner = (
        "SELECT run_id, conversation_id, agent_name, started_at_unix_nano, input_messages, output, "
        "row_number() OVER (PARTITION BY coalesce(conversation_id, run_id) ORDER BY started_at_unix_nano DESC) "
        f"AS recent FROM runs WHERE {where}"
    )
    return (
        f"SELECT run_id, conversation_id, agent_name, started_at_unix_nano, input_messages, output FROM ({inner}) "
        f"AS latest WHERE recent <= {int(runs_per_conversation)} ORDER BY conversation_id, started_at_unix_nano"
    )
