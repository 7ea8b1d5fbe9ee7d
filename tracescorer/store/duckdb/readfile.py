"""Reading a DuckDB store's file when no daemon serves it (the read commands): each query runs in a
query process (:mod:`tracescorer.store.duckdb.queryproc`) that opens the file read-only with the
query lockdown, under the same memory ceiling as the daemon's query box (``store.query_memory_limit``,
an address-space cap), and is killed if it outlives its timeout; the guard's errors come back as
the store's.

DuckDB is imported only when a function is called: the daemon never loads it outside its store process.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracescorer.store.api import QueryResult, ReadOnlyViolation, StoreError, StoreLocked

#: how long a query process may take to open the file before it is given up
_START_S = 60.0
#: after a query's own timeout (the process interrupts it), how long before the process is killed
_GRACE_S = 2.0
_ERRORS: dict[str, type[StoreError]] = {
    "ReadOnlyViolation": ReadOnlyViolation,
    "StoreLocked": StoreLocked,
    "StoreError": StoreError,
}


def run_read_query(con: Any, sql: str, *, max_rows: int, timeout_s: float, params: Sequence[Any] = ()) -> QueryResult:
    """Validate and run a read statement in this process (:func:`tracescorer.store.duckdb.readonly.run_guarded`)."""
    from tracescorer.store.duckdb import readonly

    try:
        return readonly.run_guarded(con, sql, max_rows=max_rows, timeout_s=timeout_s, params=params)
    except readonly.QueryRefused as exc:
        raise ReadOnlyViolation(str(exc)) from None
    except readonly.QueryError as exc:
        raise StoreError(str(exc)) from None


def open_read_only(path: str | Path, config: dict[str, Any] | None = None) -> Any:
    """Open a database file read-only with the query lockdown (fails while a daemon holds it);
    ``config``: further DuckDB settings."""
    from tracescorer.store.duckdb import readonly

    try:
        return readonly.connect(path, config)
    except readonly.QueryError as exc:
        raise (StoreLocked if "lock" in str(exc).lower() else StoreError)(str(exc)) from None


def query_in_process(
    path: str | Path,
    sql: str,
    *,
    max_rows: int,
    timeout_s: float,
    params: Sequence[Any] = (),
    memory_limit: str = "512MB",
    max_result_bytes: int = 64 << 20,
) -> QueryResult:
    """Run one read statement on the file at ``path`` in a query process of its own (blocking)."""
    from tracescorer.store.duckdb import queryproc

    process, chan = queryproc.spawn(memory_limit, max_result_bytes, str(path))
    stopped = threading.Event()

    def stop() -> None:
        stopped.set()
        process.kill()

    timer = threading.Timer(_START_S, stop)
    timer.daemon = True
    timer.start()
    try:
        answer = chan.recv()
        timer.cancel()
        if answer is not None and answer[0] == "ready":
            timer = threading.Timer(timeout_s + _GRACE_S, stop)
            timer.daemon = True
            timer.start()
            chan.send(("query", sql, list(params), max_rows, timeout_s))
            answer = chan.recv()
    finally:
        timer.cancel()
        chan.close()
    try:
        code = process.wait(10)
    except Exception:  # noqa: BLE001 - it ends with its socket; if not, it is killed
        process.kill()
        code = process.wait()
    if answer is None:
        if stopped.is_set():
            raise StoreError(f"query timed out after {timeout_s:g}s (its process was stopped)")
        raise StoreError(
            f"the query process ended while running the query ({queryproc.exit_status(code)}): it needed more "
            f"memory than store.query_memory_limit ({memory_limit}) allows, or it crashed"
        )
    if answer[0] == "failed":
        raise _ERRORS.get(answer[1], StoreError)(answer[2])
    result: QueryResult = answer[1]
    return result


class ReadOnlyFile:
    """:class:`~tracescorer.store.api.QueryStore` on a database file no daemon serves: each query
    runs in a query process that opens the file read-only and ends with the query (the file stays
    free for a daemon)."""

    def __init__(self, path: str | Path, *, memory_limit: str = "512MB", max_result_bytes: int = 64 << 20) -> None:
        self._path = path
        self._memory_limit = memory_limit
        self._max_result_bytes = max_result_bytes

    async def query(self, sql: str, *, max_rows: int, timeout_s: float, params: Sequence[Any] = ()) -> QueryResult:
        return await asyncio.to_thread(
            query_in_process,
            self._path,
            sql,
            max_rows=max_rows,
            timeout_s=timeout_s,
            params=params,
            memory_limit=self._memory_limit,
            max_result_bytes=self._max_result_bytes,
        )
