"""The DuckDB store's scores part: score rows and decisions, the day's judge spend, restart recovery."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from tracescorer.records.heal import HealPolicy
from tracescorer.records.scores import DecisionRecord, ScoreRecord, VerdictRecord, json_fields
from tracescorer.store.api import HealCandidate, PendingRecovery
from tracescorer.store.duckdb.fresh import NewTraces
from tracescorer.store.duckdb.jobs import Jobs, Row, coalescable, hinted
from tracescorer.store.duckdb.upsert import chunks, column, key_in, unregister, upsert
from tracescorer.store.runs import RUN_SELECT, run_from_row
from tracescorer.store.scores import (
    DECISION_FIELDS,
    SCORE_FIELDS,
    VERDICT_FIELDS,
    conversation_score_ids,
    decision_values,
    newest_scores,
    score_values,
    verdict_from_row,
    verdict_values,
    without_scores,
)
from tracescorer.store.tables import RUN_COLUMNS


class ScoresPart(Jobs):
    """:class:`~tracescorer.store.api.ScoreStore` on the store process."""

    _new_traces: NewTraces

    async def write_scores(self, scores: Sequence[ScoreRecord], decisions: Sequence[DecisionRecord]) -> None:
        fresh = self._new_traces
        await self.write(
            write_scores,
            [score_values(s) for s in scores],
            [decision_values(d) for d in decisions],
            [fresh.score(s) for s in scores],
            [fresh.decision(d) for d in decisions],
        )

    async def spent_today_usd(self) -> float:
        return await self.read(spent_today)

    async def score_statuses(self, score_ids: Sequence[str]) -> dict[str, str]:
        return {r[0]: r[1] for r in await self.read(score_statuses, list(score_ids))} if score_ids else {}

    async def spent_today_by_scorer(self, scorer_ids: Sequence[str]) -> dict[str, float]:
        if not scorer_ids:
            return {}
        return dict(await self.read(spent_today_by_scorer, list(scorer_ids)))

    async def scores_of(self, score_ids: Sequence[str]) -> dict[str, tuple[str, float | None]]:
        rows = await self.read(score_statuses, list(score_ids), True) if score_ids else []
        return {r[0]: (r[1], r[2]) for r in rows}

    async def unscored_recent(
        self, run_scorer_ids: Sequence[str], *, window_s: float, conversation_scorer_ids: Sequence[str] = ()
    ) -> PendingRecovery:
        runs, conversations = await self.read(
            unscored_recent, list(run_scorer_ids), list(conversation_scorer_ids), window_s
        )
        decided = {("run", r[0]): frozenset(d) for r, d in runs}
        decided.update({("conversation", c): frozenset(d) for c, d in conversations})
        return PendingRecovery(
            runs=[run_from_row(r) for r, _ in runs], conversation_ids=[c for c, _ in conversations], decided=decided
        )

    async def heal_candidates(
        self, scorer_ids: Sequence[str], policy: HealPolicy, *, now: float, limit: int
    ) -> list[HealCandidate]:
        if not scorer_ids or policy.max_attempts <= 0:
            return []
        rows = await self.read(heal_candidates, list(scorer_ids), *policy.query_args(), now, limit)
        return [HealCandidate(*row) for row in rows]

    async def find_verdict(self, input_hash: str, scorer_version: str, *, max_age_s: float) -> VerdictRecord | None:
        row = await self.read(find_verdict, input_hash, scorer_version, max_age_s)
        return verdict_from_row(row) if row is not None else None

    async def write_verdicts(self, verdicts: Sequence[VerdictRecord], *, max_age_s: float) -> None:
        if verdicts:
            await self.write(write_verdicts, [verdict_values(v) for v in verdicts], [max_age_s])


# --- run in the store process ------------------------------------------------------------------------


#: JSON fields: text of :func:`~tracescorer.store.scores.score_values`' encoder
_SCORE_JSON = json_fields(ScoreRecord)


@coalescable
@hinted(2)
def write_scores(
    con: Any, scores: Sequence[Row], decisions: Sequence[Row], new_scores: Sequence[bool], new_decisions: Sequence[bool]
) -> None:
    """Upsert score rows (``SCORE_FIELDS`` order) and decisions; a re-score is exported again. Left
    out, with their decisions: a conversation score of an older activity than the stored one's
    (:func:`_newest`), and a score row stored as it is already (the same rows sent again: its first
    write's stamps stay, so it is exported once)."""
    scores, new_scores, left = _newest(con, scores, new_scores)
    same: set[str] = set()
    upsert(
        con,
        "scores",
        SCORE_FIELDS,
        "id",
        scores,
        expressions={"target_ended_at": "to_timestamp(0) + to_microseconds({})"},
        stamps={"created_at": "now()", "updated_at": "now()", "exported_at": "NULL"},
        keep=("created_at",),
        new=new_scores,
        json=_SCORE_JSON,
        same=same,
    )
    if left or same:
        kept = without_scores(decisions, left | same)
        decisions, new_decisions = [decisions[i] for i in kept], [new_decisions[i] for i in kept]
    upsert(
        con, "scoring_decisions", DECISION_FIELDS, "id", decisions, stamps={"decided_at": "now()"}, new=new_decisions
    )


def _newest(con: Any, scores: Sequence[Row], new: Sequence[bool]) -> tuple[list[Row], list[bool], set[str]]:
    """:func:`~tracescorer.store.scores.newest_scores` against the stored seqs (through the index)."""
    ids = conversation_score_ids(scores)
    seqs: dict[str, int] = {}
    for part in chunks(ids):
        sql = f"SELECT id, activity_seq FROM scores WHERE {key_in('id', len(part))} AND activity_seq IS NOT NULL"
        seqs.update(con.execute(sql, part).fetchall())
    return newest_scores(scores, new, seqs)


def spent_today(con: Any) -> float:
    row = con.execute(
        "SELECT coalesce(sum(judge_cost_usd), 0) FROM scores "
        "WHERE updated_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"
    ).fetchall()
    return float(row[0][0]) if row else 0.0


def score_statuses(con: Any, score_ids: Sequence[str], with_score: bool = False) -> list[Row]:
    """The status (and score) of each stored score among ``score_ids`` (through the key's index)."""
    found: list[Row] = []
    columns = "id, status, score" if with_score else "id, status"
    for part in chunks(list(score_ids)):
        found += con.execute(f"SELECT {columns} FROM scores WHERE {key_in('id', len(part))}", part).fetchall()
    return found


def spent_today_by_scorer(con: Any, scorer_ids: Sequence[str]) -> list[tuple[str, float]]:
    return [
        (str(r[0]), float(r[1]))
        for r in con.execute(
            "SELECT scorer_id, sum(judge_cost_usd) FROM scores WHERE list_contains(?::VARCHAR[], scorer_id) "
            "AND judge_cost_usd > 0 AND updated_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' "
            "GROUP BY scorer_id",
            [list(scorer_ids)],
        ).fetchall()
    ]


def unscored_recent(
    con: Any, run_scorers: Sequence[str], conversation_scorers: Sequence[str], window_s: float
) -> tuple[list[tuple[Row, list[str]]], list[tuple[str, list[str]]]]:
    """Runs updated in the window that some run scorer has not decided, and conversations whose
    newest run is newer than some conversation scorer's decision; each with the scorers that did
    decide."""
    since = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=window_s)
    runs: list[tuple[Row, list[str]]] = []
    if run_scorers:
        n = len(RUN_COLUMNS)
        rows = con.execute(
            "WITH dec AS (SELECT target_id, list(DISTINCT scorer_id) AS ids FROM scoring_decisions "
            "WHERE target_type = 'run' AND list_contains(?::VARCHAR[], scorer_id) AND target_id IN "
            "(SELECT run_id FROM runs WHERE updated_at >= ?) GROUP BY target_id) "
            + RUN_SELECT.replace(
                " FROM runs",
                ", coalesce(dec.ids, []::VARCHAR[]) FROM runs LEFT JOIN dec ON dec.target_id = runs.run_id",
            )
            + " WHERE updated_at >= ? AND len(coalesce(dec.ids, []::VARCHAR[])) < ? ORDER BY started_at_unix_nano",
            [list(run_scorers), since, since, len(set(run_scorers))],
        ).fetchall()
        runs = [(tuple(r[:n]), list(r[n])) for r in rows]
    conversations: list[tuple[str, list[str]]] = []
    if conversation_scorers:
        rows = con.execute(
            "WITH c AS (SELECT conversation_id, max(updated_at) AS last FROM runs WHERE conversation_id IS NOT NULL "
            "AND updated_at >= ? GROUP BY conversation_id) "
            "SELECT c.conversation_id, coalesce(list(DISTINCT d.scorer_id) FILTER (d.scorer_id IS NOT NULL), []) "
            "FROM c LEFT JOIN scoring_decisions d ON d.target_type = 'conversation' AND d.target_id = c.conversation_id "
            "AND d.decided_at >= c.last AND list_contains(?::VARCHAR[], d.scorer_id) "
            + "GROUP BY c.conversation_id HAVING count(DISTINCT d.scorer_id) < ? ORDER BY min(c.last)",
            [since, list(conversation_scorers), len(set(conversation_scorers))],
        ).fetchall()
        conversations = [(r[0], list(r[1])) for r in rows]
    return runs, conversations


def heal_candidates(
    con: Any,
    scorer_ids: Sequence[str],
    max_attempts: int,
    max_age_s: float,
    initial_backoff_s: float,
    max_backoff_s: float,
    now: float,
    limit: int,
) -> list[Row]:
    """Transient error scores due a re-score at ``now`` (epoch s; :meth:`ScoreStore.heal_candidates`);
    ``updated_at`` bounds the scan first (row groups are skipped by their min/max). The backoff is
    :meth:`HealPolicy.backoff_s` again, in SQL: the LIMIT is to pick among the due rows."""
    return [
        tuple(r)
        for r in con.execute(
            "SELECT id, scorer_id, CASE WHEN entity_type = 'conversation' THEN 'conversation' ELSE 'run' END, "
            "CASE WHEN entity_type = 'conversation' THEN conversation_id ELSE run_id END, coalesce(heal_attempts, 0) "
            "FROM scores WHERE updated_at >= to_timestamp($now) - to_seconds($max_age::DOUBLE) "
            "AND created_at >= to_timestamp($now) - to_seconds($max_age::DOUBLE) "
            "AND status = 'error' AND error_class = 'transient' AND list_contains($ids::VARCHAR[], scorer_id) "
            "AND coalesce(heal_attempts, 0) < $attempts AND updated_at + to_seconds(least($initial::DOUBLE * pow(2, "
            "coalesce(heal_attempts, 0)), $cap::DOUBLE)) <= to_timestamp($now) ORDER BY updated_at LIMIT $limit",
            {
                "now": now,
                "max_age": max_age_s,
                "ids": list(scorer_ids),
                "attempts": max_attempts,
                "initial": initial_backoff_s,
                "cap": max_backoff_s,
                "limit": limit,
            },
        ).fetchall()
    ]


_VERDICT_LIST = ", ".join(VERDICT_FIELDS)
_VERDICTS = "verdict_batch"


def find_verdict(con: Any, input_hash: str, scorer_version: str, max_age_s: float) -> Row | None:
    """The newest verdict of the request under the version within the age (no key: the age bounds
    the scan first, row groups are skipped by their min/max)."""
    rows = con.execute(
        f"SELECT {_VERDICT_LIST} FROM judge_verdicts WHERE judged_at >= now() - to_seconds(?::DOUBLE) "
        "AND input_hash = ? AND scorer_version = ? ORDER BY judged_at DESC LIMIT 1",
        [max_age_s, input_hash, scorer_version],
    ).fetchall()
    return tuple(rows[0]) if rows else None


@coalescable
def write_verdicts(con: Any, verdicts: Sequence[Row], ages: Sequence[float]) -> None:
    """Append verdicts stamped now (one Arrow batch: ``executemany`` inserts row by row, ~0.45 ms a
    row); delete those past the (longest) reuse age."""
    import pyarrow as pa  # the store process only

    kinds = ["string"] * len(VERDICT_FIELDS)  # every column is text (score_id may be null throughout)
    arrays = [column(list(values), kind) for values, kind in zip(zip(*verdicts, strict=True), kinds, strict=True)]
    con.register(_VERDICTS, pa.Table.from_arrays(arrays, names=VERDICT_FIELDS))
    try:
        con.execute(
            f"INSERT INTO judge_verdicts ({_VERDICT_LIST}, judged_at) SELECT {_VERDICT_LIST}, now() FROM {_VERDICTS}"
        )
    finally:
        unregister(con, _VERDICTS)
    con.execute("DELETE FROM judge_verdicts WHERE judged_at < now() - to_seconds(?::DOUBLE)", [max(ages)])
