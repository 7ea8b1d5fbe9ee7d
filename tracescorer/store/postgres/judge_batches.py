"""Provider batches of judge requests (``judge_batches``) in PostgreSQL."""

from __future__ import annotations

from typing import Any

from tracescorer.records.judge_batches import JudgeBatchRecord
from tracescorer.store.judge_batches import batch_from_row, batch_values
from tracescorer.store.postgres.tx import Tx
from tracescorer.store.tables import JUDGE_BATCH_COLUMNS, column_names

Conn = Any  # psycopg.AsyncConnection

_FIELDS = column_names(JUDGE_BATCH_COLUMNS)
_LIST = ", ".join(_FIELDS)
_PUT = (
    f"INSERT INTO judge_batches ({_LIST}) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET "
    + ", ".join(f"{f} = excluded.{f}" for f in _FIELDS[1:])
)


async def open_batches(conn: Conn) -> list[tuple[Any, ...]]:
    cur = await conn.execute(f"SELECT {_LIST} FROM judge_batches WHERE status <> 'closed' ORDER BY created_at")
    return [tuple(r) for r in await cur.fetchall()]


async def put_batch(conn: Conn, row: tuple[Any, ...]) -> None:
    await conn.execute(_PUT, list(row))


class JudgeBatchesPart(Tx):
    """The provider batches of judge requests: the part of :class:`~tracescorer.store.api.ScoreStore`
    for batch mode, in PostgreSQL."""

    async def open_judge_batches(self) -> list[JudgeBatchRecord]:
        return [batch_from_row(r) for r in await self._tx(open_batches, write=False)]

    async def put_judge_batch(self, batch: JudgeBatchRecord) -> None:
        await self._tx(put_batch, batch_values(batch))
