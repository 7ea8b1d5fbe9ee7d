"""The DuckDB store's part for provider batches of judge requests (``judge_batches``)."""

from __future__ import annotations

from typing import Any

from tracescorer.records.judge_batches import JudgeBatchRecord
from tracescorer.store.duckdb.jobs import Jobs, Row, prompt
from tracescorer.store.judge_batches import BATCH_LIST, batch_from_row, batch_values


class JudgeBatchesPart(Jobs):
    """:meth:`~tracescorer.store.api.ScoreStore.open_judge_batches` and ``put_judge_batch`` on the store process."""

    async def open_judge_batches(self) -> list[JudgeBatchRecord]:
        return [batch_from_row(r) for r in await self.read(open_batches)]

    async def put_judge_batch(self, batch: JudgeBatchRecord) -> None:
        await self.write(put_batch, batch_values(batch))


# --- run in the store process ------------------------------------------------------------------------


def open_batches(con: Any) -> list[Row]:
    rows = con.execute(
        f"SELECT {BATCH_LIST} FROM judge_batches WHERE status <> 'closed' ORDER BY created_at"
    ).fetchall()
    return [tuple(r) for r in rows]


@prompt  # the batcher submits the batch once its intent is stored
def put_batch(con: Any, row: Row) -> None:
    con.execute(f"INSERT OR REPLACE INTO judge_batches ({BATCH_LIST}) VALUES (?, ?, ?, ?, ?, ?)", list(row))
