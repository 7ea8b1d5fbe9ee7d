"""The DuckDB store's reads part: the product's own reads (:mod:`tracescorer.store.reads`) on the
store process's reader cursors, beside the pipeline's reads (committed data only), or, for a read
command when no daemon serves the file, on the file opened read-only in the command's process.

Neither is the query path of users' SQL: no query process, no pushdown scans, no row limit but the
read's own ``limit``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracescorer.store.api import QueryResult, StoreError
from tracescorer.store.duckdb.jobs import Jobs
from tracescorer.store.statement import Query


class ReadsPart(Jobs):
    """:class:`~tracescorer.store.reads.RowSource` on the store process."""

    async def fetch_rows(self, query: Query) -> QueryResult:
        return await self.read(fetch_rows, query.sql, list(query.params), query.limit)


class FileRows:
    """:class:`~tracescorer.store.reads.RowSource` on a database file no daemon serves: each read
    opens it read-only (in a worker thread) and closes it, so the file stays free for a daemon
    between reads; at most ``memory_limit`` of DuckDB's memory."""

    def __init__(self, path: str | Path, *, memory_limit: str = "512MB") -> None:
        self._path = path
        self._memory_limit = memory_limit

    async def fetch_rows(self, query: Query) -> QueryResult:
        return await asyncio.to_thread(self._fetch, query)

    def _fetch(self, query: Query) -> QueryResult:
        import duckdb

        from tracescorer.store.duckdb.readfile import open_read_only

        con = open_read_only(self._path, config={"memory_limit": self._memory_limit})
        try:
            return fetch_rows(con, query.sql, list(query.params), query.limit)
        except duckdb.Error as exc:
            raise StoreError(f"read failed: {exc}") from None
        finally:
            con.close()


# --- run in the store process (or on the read-only file) ---------------------------------------------


def fetch_rows(con: Any, sql: str, params: Sequence[Any], limit: int | None) -> QueryResult:
    """Run one of the store's own SELECTs: every row, or ``limit`` of them (``truncated`` past it)."""
    cur = con.execute(sql if limit is None else f"{sql} LIMIT {int(limit) + 1}", list(params))
    description = cur.description or []
    fetched = cur.fetchall()
    kept = fetched if limit is None else fetched[:limit]
    return QueryResult(
        columns=[d[0] for d in description],
        types=[str(d[1]) for d in description],
        rows=[tuple(r) for r in kept],
        truncated=len(fetched) > len(kept),
    )
