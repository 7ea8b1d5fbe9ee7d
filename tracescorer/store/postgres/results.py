"""Runs, scores, decisions and judge spend in PostgreSQL: async functions ``op(conn, *args)``.

Each runs inside the transaction :class:`~tracescorer.store.postgres.store.PostgresResultStore`
opened for it; rows come in and go out as the same plain tuples the DuckDB store uses
(:func:`tracescorer.store.runs.run_to_row`, :func:`tracescorer.store.scores.score_values`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from typing import Any

from tracescorer.model import AgentRun, Conversation
from tracescorer.records.heal import HealPolicy
from tracescorer.records.scores import DecisionRecord, ScoreRecord
from tracescorer.store.api import HealCandidate, PendingRecovery, ResultsPruned
from tracescorer.store.postgres.bulk import column_types, upsert_params, upsert_sql
from tracescorer.store.postgres.schema import RESULT_TABLES
from tracescorer.store.postgres.tx import Tx
from tracescorer.store.runs import RUN_SELECT, run_from_row, run_to_row
from tracescorer.store.scores import (
    DECISION_FIELDS,
    SCORE_FIELDS,
    decision_values,
    newest_scores,
    score_values,
    without_scores,
)
from tracescorer.store.tables import RUN_COLUMNS

Row = tuple[Any, ...]
Conn = Any  # psycopg.AsyncConnection (imported lazily: only postgres mode loads psycopg)

_RUN_TYPES = column_types(RESULT_TABLES["runs"])
_RUN_DATA = [c for c, _ in RESULT_TABLES["runs"] if c not in ("created_at", "updated_at", "assembled_by")]
_RUNS_SQL = upsert_sql(
    "runs",
    [*_RUN_DATA, "assembled_by"],
    _RUN_TYPES,
    "run_id",
    stamps={"created_at": "now()", "updated_at": "now()"},
    keep=("created_at",),
)
_SCORE_TYPES = column_types(RESULT_TABLES["scores"])
# a row without a seq replaces and keeps the stored one
_SCORE_MERGE = {"activity_seq": "coalesce(excluded.activity_seq, t.activity_seq)"}


def _score_content(side: str) -> str:
    """The score columns of the stored row (``t``) or the one written (``excluded``) as one ROW;
    json has no equality: its text (stored as written) is compared."""
    values = [f"t.{c}" if side == "t" else _SCORE_MERGE.get(c, f"excluded.{c}") for c in SCORE_FIELDS if c != "id"]
    kinds = [_SCORE_TYPES[c] for c in SCORE_FIELDS if c != "id"]
    return "ROW(" + ", ".join(f"({v})::text" if k == "JSON" else v for v, k in zip(values, kinds, strict=True)) + ")"


_SCORES_SQL = upsert_sql(
    "scores",
    SCORE_FIELDS,
    _SCORE_TYPES,
    "id",
    stamps={"created_at": "now()", "updated_at": "now()", "exported_at": "NULL::timestamptz"},
    keep=("created_at",),
    merge=_SCORE_MERGE,
    # a conversation score of an older activity (a late write of a claim lost since) leaves the
    # newer one; a row stored as it is already (the same rows sent again) keeps its stamps, so it
    # is exported once
    where="(excluded.activity_seq IS NULL OR t.activity_seq IS NULL OR excluded.activity_seq >= t.activity_seq) "
    f"AND {_score_content('t')} IS DISTINCT FROM {_score_content('excluded')}",
    returning=" RETURNING id",
)
_SCORE_ID, _SCORE_SEQ = SCORE_FIELDS.index("id"), SCORE_FIELDS.index("activity_seq")
_DECISIONS_SQL = upsert_sql(
    "scoring_decisions",
    DECISION_FIELDS,
    column_types(RESULT_TABLES["scoring_decisions"]),
    "id",
    stamps={"decided_at": "now()"},
)

_RUN_LIST = ", ".join(name for name, _ in RUN_COLUMNS)

_TOUCH_SQL = """
INSERT INTO conversation_activity AS c (conversation_id, last_activity, activity_seq)
SELECT id, now(), 1 FROM unnest(%s::text[]) AS id
ON CONFLICT (conversation_id) DO UPDATE SET last_activity = now(), activity_seq = c.activity_seq + 1
"""

_SPEND_SQL = """
INSERT INTO judge_spend AS j (day, spent_usd, updated_at) VALUES ((now() AT TIME ZONE 'UTC')::date, %s, now())
ON CONFLICT (day) DO UPDATE SET spent_usd = j.spent_usd + excluded.spent_usd, updated_at = now()
"""


async def _rows(conn: Conn, sql: str, params: Sequence[Any] = ()) -> list[Row]:
    cur = await conn.execute(sql, list(params))
    return [tuple(r) for r in await cur.fetchall()]


async def upsert_runs(
    conn: Conn, run_rows: Sequence[Sequence[Any]], replace_traces: Sequence[str], assembled_by: str
) -> int:
    """Upsert runs (``run_to_row`` values), drop runs of re-assembled traces the new extraction no
    longer has, and mark their conversations active now (one transaction)."""
    if run_rows:
        await conn.execute(
            _RUNS_SQL, upsert_params([*_RUN_DATA, "assembled_by"], "run_id", [(*r, assembled_by) for r in run_rows])
        )
    if replace_traces:
        await conn.execute(
            "DELETE FROM runs WHERE trace_id = ANY(%s::text[]) AND NOT (run_id = ANY(%s::text[]))",
            [sorted(set(replace_traces)), [r[0] for r in run_rows]],
        )
    conversations = sorted({r[_RUN_DATA.index("conversation_id")] for r in run_rows} - {None})
    if conversations:
        await conn.execute(_TOUCH_SQL, [conversations])
    return len(run_rows)


async def load_runs(conn: Conn, run_ids: Sequence[str]) -> list[Row]:
    return await _rows(
        conn, RUN_SELECT + " WHERE run_id = ANY(%s::text[]) ORDER BY started_at_unix_nano, run_id", [list(run_ids)]
    )


async def load_conversation(conn: Conn, conversation_id: str) -> list[Row]:
    return await _rows(
        conn, RUN_SELECT + " WHERE conversation_id = %s ORDER BY started_at_unix_nano, run_id", [conversation_id]
    )


async def target_ids(conn: Conn, scope: str, since: dt.datetime | None, until: dt.datetime | None) -> list[str]:
    clauses, params = ["TRUE"], []
    if since is not None:
        clauses.append("started_at >= %s")
        params.append(since)
    if until is not None:
        clauses.append("started_at < %s")
        params.append(until)
    where = " AND ".join(clauses)
    if scope == "run":
        sql = f"SELECT run_id FROM runs WHERE {where} ORDER BY started_at_unix_nano, run_id"
    else:
        sql = (
            f"SELECT conversation_id FROM runs WHERE conversation_id IS NOT NULL AND {where} "
            "GROUP BY conversation_id ORDER BY min(started_at_unix_nano), conversation_id"
        )
    return [r[0] for r in await _rows(conn, sql, params)]


async def write_scores(conn: Conn, scores: Sequence[Row], decisions: Sequence[Row]) -> None:
    """Upsert score rows (a re-score is exported again) and decisions; add the judge cost to the
    day's shared spend in the same transaction. Left out, with their decisions: a conversation
    score of an older activity than the stored row's (its judge calls were made too: counted), and
    a score row stored as it is already (the same rows sent again: counted when first stored)."""
    if scores:
        # the batch's own order first (two rows of one id); the statement's WHERE against the stored row
        rows, _, stale = newest_scores(scores, [False] * len(scores), {})
        cur = await conn.execute(_SCORES_SQL, upsert_params(SCORE_FIELDS, "id", rows))
        left = {r[_SCORE_ID] for r in rows} - {r[0] for r in await cur.fetchall()}
        decisions = [decisions[i] for i in without_scores(decisions, stale | left)]  # the stored score's stay
        same = left - await _older(conn, [r for r in rows if r[_SCORE_ID] in left])
        cost_index = SCORE_FIELDS.index("judge_cost_usd")
        cost = sum(float(r[cost_index] or 0.0) for r in scores if r[_SCORE_ID] not in same)
        if cost > 0:
            await conn.execute(_SPEND_SQL, [cost])
    if decisions:
        await conn.execute(_DECISIONS_SQL, upsert_params(DECISION_FIELDS, "id", decisions))


async def _older(conn: Conn, rows: Sequence[Row]) -> set[str]:
    """The ids of the conversation score ``rows`` of an older activity than their stored row's."""
    seqs = {r[_SCORE_ID]: r[_SCORE_SEQ] for r in rows if r[_SCORE_SEQ] is not None}
    if not seqs:
        return set()
    stored = await _rows(
        conn,
        "SELECT id, activity_seq FROM scores WHERE id = ANY(%s::text[]) AND activity_seq IS NOT NULL",
        [list(seqs)],
    )
    return {sid for sid, seq in stored if seqs[sid] < seq}


async def score_statuses(conn: Conn, score_ids: Sequence[str]) -> list[Row]:
    return await _rows(conn, "SELECT id, status FROM scores WHERE id = ANY(%s::text[])", [list(score_ids)])


async def spent_today(conn: Conn) -> float:
    rows = await _rows(conn, "SELECT spent_usd FROM judge_spend WHERE day = (now() AT TIME ZONE 'UTC')::date")
    return float(rows[0][0]) if rows else 0.0


async def spent_today_by_scorer(conn: Conn, scorer_ids: Sequence[str]) -> list[Row]:
    return await _rows(
        conn,
        "SELECT scorer_id, sum(judge_cost_usd) FROM scores WHERE scorer_id = ANY(%s::text[]) AND judge_cost_usd > 0 "
        "AND updated_at >= (date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') GROUP BY scorer_id",
        [list(scorer_ids)],
    )


_PRUNE = (
    ("runs", "updated_at < %s"),
    ("scores", "updated_at < %s"),
    ("scoring_decisions", "decided_at < %s"),
    ("score_deliveries", "score_version < (extract(epoch FROM %s::timestamptz) * 1000000)::bigint"),
    ("evaluations", "received_at < %s"),
)


async def prune_results(conn: Conn, older_than: dt.datetime) -> dict[str, int]:
    """Delete runs, scores, decisions, delivery rows and external evaluations last written before
    ``older_than`` (human labels are kept)."""
    deleted = {}
    for table, before in _PRUNE:
        cur = await conn.execute(f"DELETE FROM {table} WHERE {before}", [older_than])
        deleted[table] = int(cur.rowcount)
    return deleted


async def unscored_recent(
    conn: Conn, run_scorers: Sequence[str], window_s: float, assembled_by: str
) -> tuple[list[tuple[Row, list[str]]], list[str]]:
    """Runs this daemon stored in the window that lack a decision of some run scorer, each with
    the scorers that did decide. Conversations need no recovery here: their due state is in
    ``conversation_activity`` until a scoring finishes."""
    if not run_scorers:
        return [], []
    decided = (
        "ARRAY(SELECT d.scorer_id FROM scoring_decisions d WHERE d.target_type = 'run' "
        "AND d.target_id = runs.run_id AND d.scorer_id = ANY(%s::text[]))"
    )
    rows = await _rows(
        conn,
        (
            f"SELECT * FROM (SELECT {_RUN_LIST}, {decided} AS decided, started_at_unix_nano "
            "AS o FROM runs WHERE updated_at >= now() - make_interval(secs => %s) AND assembled_by = %s) x "
            "WHERE cardinality(decided) < %s ORDER BY o"
        ),
        [list(run_scorers), window_s, assembled_by, len(set(run_scorers))],
    )
    return [(r[:-2], list(r[-2])) for r in rows], []


async def heal_candidates(
    conn: Conn,
    scorer_ids: Sequence[str],
    max_attempts: int,
    max_age_s: float,
    initial_backoff_s: float,
    max_backoff_s: float,
    now: float,
    limit: int,
) -> list[Row]:
    """Transient error scores due a re-score at ``now`` (epoch s; :meth:`ScoreStore.heal_candidates`);
    the ``updated_at`` bound goes through the ``scores_updated`` index. The backoff is
    :meth:`HealPolicy.backoff_s` again, in SQL: the LIMIT is to pick among the due rows."""
    cur = await conn.execute(
        "SELECT id, scorer_id, CASE WHEN entity_type = 'conversation' THEN 'conversation' ELSE 'run' END, "
        "CASE WHEN entity_type = 'conversation' THEN conversation_id ELSE run_id END, coalesce(heal_attempts, 0) "
        "FROM scores WHERE updated_at >= to_timestamp(%(now)s) - make_interval(secs => %(max_age)s) "
        "AND created_at >= to_timestamp(%(now)s) - make_interval(secs => %(max_age)s) AND status = 'error' "
        "AND error_class = 'transient' AND scorer_id = ANY(%(ids)s::text[]) AND coalesce(heal_attempts, 0) < "
        "%(attempts)s AND updated_at + make_interval(secs => least(%(initial)s * power(2, coalesce(heal_attempts, 0)), "
        "%(cap)s)) <= to_timestamp(%(now)s) ORDER BY updated_at LIMIT %(limit)s",
        {
            "now": now,
            "max_age": max_age_s,
            "ids": list(scorer_ids),
            "attempts": max_attempts,
            "initial": initial_backoff_s,
            "cap": max_backoff_s,
            "limit": limit,
        },
    )
    return [tuple(r) for r in await cur.fetchall()]


class ResultsPart(Tx):
    """:class:`~tracescorer.store.api.RunStore` and :class:`~tracescorer.store.api.ScoreStore` in PostgreSQL,
    and results retention."""

    async def upsert_runs(
        self, runs: Sequence[AgentRun], *, replace_traces: Sequence[str] = (), new_traces: Collection[str] = ()
    ) -> None:  # INSERT ... ON CONFLICT needs no hint
        if not runs and not replace_traces:
            return
        rows = [run_to_row(r) for r in runs]
        self.stats["rows"] += await self._tx(upsert_runs, rows, list(replace_traces), self.instance_id)

    async def load_runs(self, run_ids: Sequence[str]) -> list[AgentRun]:
        return [run_from_row(r) for r in await self._tx(load_runs, list(run_ids), write=False)]

    async def load_conversation(self, conversation_id: str) -> Conversation | None:
        runs = tuple(run_from_row(r) for r in await self._tx(load_conversation, conversation_id, write=False))
        return Conversation(conversation_id=conversation_id, runs=runs) if runs else None

    async def target_ids(self, scope: str, *, since: dt.datetime | None, until: dt.datetime | None) -> list[str]:
        return await self._tx(target_ids, scope, since, until, write=False)

    async def write_scores(self, scores: Sequence[ScoreRecord], decisions: Sequence[DecisionRecord]) -> None:
        if not scores and not decisions:
            return
        await self._tx(write_scores, [score_values(s) for s in scores], [decision_values(d) for d in decisions])
        self.stats["rows"] += len(scores) + len(decisions)

    async def spent_today_usd(self) -> float:
        return await self._tx(spent_today, write=False)

    async def score_statuses(self, score_ids: Sequence[str]) -> dict[str, str]:
        if not score_ids:
            return {}
        return {r[0]: r[1] for r in await self._tx(score_statuses, list(score_ids), write=False)}

    async def spent_today_by_scorer(self, scorer_ids: Sequence[str]) -> dict[str, float]:
        if not scorer_ids:
            return {}
        rows = await self._tx(spent_today_by_scorer, list(scorer_ids), write=False)
        return {str(r[0]): float(r[1]) for r in rows}

    async def prune_results(self, older_than: dt.datetime | None) -> ResultsPruned:
        # indexes in PostgreSQL are on disk: only the age deletes
        if older_than is None:
            return ResultsPruned()
        return ResultsPruned(deleted=await self._tx(prune_results, older_than), transactions=1)

    async def heal_candidates(
        self, scorer_ids: Sequence[str], policy: HealPolicy, *, now: float, limit: int
    ) -> list[HealCandidate]:
        if not scorer_ids or policy.max_attempts <= 0:
            return []
        rows = await self._tx(heal_candidates, list(scorer_ids), *policy.query_args(), now, limit, write=False)
        return [HealCandidate(str(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4])) for r in rows]

    async def unscored_recent(
        self, run_scorer_ids: Sequence[str], *, window_s: float, conversation_scorer_ids: Sequence[str] = ()
    ) -> PendingRecovery:
        found, _ = await self._tx(unscored_recent, list(run_scorer_ids), window_s, self.instance_id, write=False)
        return PendingRecovery(
            runs=[run_from_row(r) for r, _ in found],
            conversation_ids=[],
            decided={("run", r[0]): frozenset(d) for r, d in found},
        )
