"""Reading a DuckDB store's file when no daemon serves it (the read commands): open it read-only with
the query lockdown and run guarded statements, the guard's errors as the store's.

DuckDB is imported only when a function is called: the daemon never loads it outside its store process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracescorer.store.api import QueryResult, ReadOnlyViolation, StoreError, StoreLocked


def run_read_query(con: Any, sql: str, *, max_rows: int, timeout_s: float, params: Sequence[Any] = ()) -> QueryResult:
    """Validate and run a read statement (:func:`tracescorer.store.duckdb.readonly.run_guarded`)."""
    from tracescorer.store.duckdb import readonly

    try:
        return readonly.run_guarded(con, sql, max_rows=max_rows, timeout_s=timeout_s, params=params)
    except readonly.QueryRefused as exc:
        raise ReadOnlyViolation(str(exc)) from None
    except readonly.QueryError as exc:
        raise StoreError(str(exc)) from None


def open_read_only(path: str | Path) -> Any:
    """Open a database file read-only with the query lockdown (fails while a daemon holds it)."""
    from tracescorer.store.duckdb import readonly

    try:
        return readonly.connect(path)
    except readonly.QueryError as exc:
        raise (StoreLocked if "lock" in str(exc).lower() else StoreError)(str(exc)) from None


class ReadOnlyFile:
    """:class:`~tracescorer.store.api.QueryStore` on a database file no daemon serves: each query
    opens it read-only, runs in a worker thread, and closes it (the file stays free for a daemon)."""

    def __init__(self, path: str | Path) -> None:
        self._path = path

    async def query(self, sql: str, *, max_rows: int, timeout_s: float, params: Sequence[Any] = ()) -> QueryResult:
        return await asyncio.to_thread(self._query, sql, max_rows, timeout_s, params)

    def _query(self, sql: str, max_rows: int, timeout_s: float, params: Sequence[Any]) -> QueryResult:
        con = open_read_only(self._path)
        try:
            return run_read_query(con, sql, max_rows=max_rows, timeout_s=timeout_s, params=params)
        finally:
            con.close()
