"""Judge verdicts kept for reuse (:meth:`~tracescorer.store.api.ScoreStore.find_verdict`) and the
scores gated bindings read (:meth:`~tracescorer.store.api.ScoreStore.scores_of`), in PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracescorer.records.scores import VerdictRecord
from tracescorer.store.postgres.tx import Tx
from tracescorer.store.scores import VERDICT_FIELDS, verdict_from_row, verdict_values

Conn = Any  # psycopg.AsyncConnection

_LIST = ", ".join(VERDICT_FIELDS)
_FIND = (
    f"SELECT {_LIST} FROM judge_verdicts WHERE input_hash = %s AND scorer_version = %s "
    "AND judged_at >= now() - make_interval(secs => %s) ORDER BY judged_at DESC LIMIT 1"
)
_INSERT = f"INSERT INTO judge_verdicts ({_LIST}, judged_at) VALUES ({', '.join(['%s'] * len(VERDICT_FIELDS))}, now())"


async def find_verdict(conn: Conn, input_hash: str, scorer_version: str, max_age_s: float) -> tuple[Any, ...] | None:
    cur = await conn.execute(_FIND, [input_hash, scorer_version, max_age_s])
    row = await cur.fetchone()
    return tuple(row) if row is not None else None


async def write_verdicts(conn: Conn, rows: Sequence[tuple[Any, ...]], max_age_s: float) -> None:
    async with conn.cursor() as cur:
        await cur.executemany(_INSERT, list(rows))
    await conn.execute("DELETE FROM judge_verdicts WHERE judged_at < now() - make_interval(secs => %s)", [max_age_s])


async def scores_of(conn: Conn, score_ids: Sequence[str]) -> list[tuple[Any, ...]]:
    cur = await conn.execute("SELECT id, status, score FROM scores WHERE id = ANY(%s::text[])", [list(score_ids)])
    return [tuple(r) for r in await cur.fetchall()]


class VerdictsPart(Tx):
    """Judge verdicts kept for reuse (looked up through the ``judge_verdicts_input`` index) and the
    gate scores of gated bindings: the parts of :class:`~tracescorer.store.api.ScoreStore` for
    judging less, in PostgreSQL."""

    async def scores_of(self, score_ids: Sequence[str]) -> dict[str, tuple[str, float | None]]:
        rows = await self._tx(scores_of, list(score_ids), write=False) if score_ids else []
        return {str(r[0]): (str(r[1]), r[2]) for r in rows}

    async def find_verdict(self, input_hash: str, scorer_version: str, *, max_age_s: float) -> VerdictRecord | None:
        row = await self._tx(find_verdict, input_hash, scorer_version, max_age_s, write=False)
        return verdict_from_row(row) if row is not None else None

    async def write_verdicts(self, verdicts: Sequence[VerdictRecord], *, max_age_s: float) -> None:
        if verdicts:
            await self._tx(write_verdicts, [verdict_values(v) for v in verdicts], max_age_s)
