"""The store process's query box: ops-API and CLI queries run in processes of their own.

Why a box: a read-only query on the store's own connection shared everything with the writers
and the pipeline's reads. DuckDB's ``memory_limit`` covers its buffer manager only, so
``SELECT len(range(1500000000))`` grew the store process to 17 GB and ``repeat('x', 3e9)``
answered with 5.9 GB in use under a 1 GB limit; queries within the limit took memory the writers
needed; six slow queries delayed a conversation's score from 3 s to 89 s behind the two reader
threads they shared with the pipeline. A second process cannot open the file (DuckDB: one process
reads and writes a database, or several only read it), and a copy of the files per query would cost
their size. So a query runs in a query process (:mod:`tracescorer.store.duckdb.queryproc`, started
by this box, one per slot) with its own DuckDB, its own ``memory_limit``, an address-space cap and a
lower CPU priority; it reads the store's tables from this process as Arrow batches, the columns
DuckDB projects and the rows the query's filters keep (:mod:`tracescorer.store.duckdb.pushdown`),
one batch per request. Only those plain filtered scans run here, on the box's own threads (at a
lower priority too): the pipeline's reader threads never wait for a query.

``store.query_max_concurrent`` queries run at once (one worker thread and query process each; the
ops API refuses more, retryable); a query past ``store.query_timeout_s`` is interrupted by its
process, and past a grace (``EngineOptions.query_grace_s``, 2 s) more its process is killed and a
new one started for the next query. Each scan reads in its own read transaction: two tables of one
query may be read a moment apart.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import duckdb

from tracescorer.store.api import QueryResult
from tracescorer.store.duckdb import layout, pushdown, queryproc, readonly
from tracescorer.store.duckdb.wire import EngineOptions, Failure

log = logging.getLogger("tracescorer.store.duckdb.engine")  # run in the store process

Connection = duckdb.DuckDBPyConnection
Reply = Callable[[int, bool, Any, dict[str, Any]], None]

#: rows per Arrow batch a scan sends (one batch in flight per scan)
BATCH_ROWS = 2048
_START_S = 60.0


class QueryFailed(Exception):
    """A query's answer was an error (``kind`` names the daemon's error class)."""

    def __init__(self, kind: str, message: str, *, recycle: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.recycle = recycle  # the query process is not used again


def _lower_priority() -> None:
    """This thread after the pipeline's (Linux keeps a nice value per thread)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (OSError, AttributeError):
        pass


class _Scan:
    """One table scan a query process asked for: a streaming read on a cursor of its own."""

    def __init__(self, cursor: Connection, sql: str, params: list[Any]) -> None:
        self.cursor = cursor
        self._reader = cursor.sql(sql, params=params or None).to_arrow_reader(BATCH_ROWS)

    def next(self) -> Any:
        try:
            return self._reader.read_next_batch()
        except StopIteration:
            return None

    def close(self) -> None:
        for close in (self._reader.close, self.cursor.close):
            try:
                close()
            except Exception:  # noqa: BLE001 - closing a finished or interrupted scan
                pass


class _QueryProcess:
    """One query process and the socket to it (used by one worker thread at a time)."""

    def __init__(self, box: QueryBox) -> None:
        self._box = box
        self._process, self._chan = queryproc.spawn(box.options.query_memory_limit, box.options.query_max_result_bytes)
        self._timed_out = False
        self._scan: _Scan | None = None  # the one reading now (interrupted at the timeout)
        self.store_error: BaseException | None = None
        timer = threading.Timer(_START_S, self._process.kill)
        timer.daemon = True
        timer.start()
        try:
            self._chan.send(box.hello())
            ready = self._chan.recv()
        finally:
            timer.cancel()
        if ready is None or ready[0] != "ready":
            self.close()
            raise QueryFailed(
                "StoreError", f"the query process did not start ({queryproc.exit_status(self._process.poll())})"
            )

    def query(self, sql: str, params: list[Any], max_rows: int, timeout_s: float) -> QueryResult:
        self._timed_out = False
        self.store_error = None
        timer = threading.Timer(timeout_s + self._box.options.query_grace_s, self._stop_at_timeout)
        timer.daemon = True
        timer.start()
        scans: dict[int, _Scan] = {}
        try:
            self._chan.send(("query", sql, params, max_rows, timeout_s))
            while (message := self._chan.recv()) is not None:
                kind = message[0]
                if kind == "result":
                    result: QueryResult = message[1]
                    return result
                if kind == "failed":
                    memory = "query_memory_limit" in message[2]
                    raise QueryFailed(message[1], message[2], recycle=memory)
                if kind == "scan":
                    answer = self._start_scan(scans, *message[1:])
                elif kind == "next":
                    answer = self._next(scans, message[1])
                else:
                    raise QueryFailed("StoreError", f"the query process sent {kind!r}", recycle=True)
                self._chan.send(answer)
            raise self._ended(timeout_s)
        finally:
            timer.cancel()
            self._scan = None
            for scan in scans.values():
                scan.close()

    def _start_scan(
        self, scans: dict[int, _Scan], scan_id: int, table: str, columns: list[str], where: Any, params: Any
    ) -> tuple[Any, ...]:
        cursor = self._box.cursor()
        try:
            sql = pushdown.scan_sql(cursor, table, self._box.columns(table), columns, where)
            scans[scan_id] = self._scan = _Scan(cursor, sql, list(params))
        except (duckdb.Error, ValueError, KeyError) as exc:
            cursor.close()
            return self._scan_failed(scan_id, table, exc)
        return self._next(scans, scan_id, table)

    def _next(self, scans: dict[int, _Scan], scan_id: int, table: str = "") -> tuple[Any, ...]:
        scan = scans.get(scan_id)
        if scan is None:
            return ("scan_failed", scan_id, f"no scan {scan_id}")
        self._scan = scan
        try:
            batch = scan.next()
        except duckdb.Error as exc:
            return self._scan_failed(scan_id, table, exc)
        if batch is None:
            scans.pop(scan_id).close()
        return ("batch", scan_id, batch)

    def _scan_failed(self, scan_id: int, table: str, exc: BaseException) -> tuple[Any, ...]:
        if self._timed_out:
            return ("scan_failed", scan_id, "timed out")
        self.store_error = exc  # looked at once the query is answered (DuckDB may have invalidated a database)
        return ("scan_failed", scan_id, f"reading {table or 'a table'} in the store process failed: {exc}")

    def _stop_at_timeout(self) -> None:
        self._timed_out = True
        self._process.kill()
        scan = self._scan
        if scan is not None:
            scan.cursor.interrupt()

    def _ended(self, timeout_s: float) -> QueryFailed:
        try:
            code = self._process.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        if self._timed_out:
            return QueryFailed(
                "StoreError", f"query timed out after {timeout_s:g}s (its process was stopped)", recycle=True
            )
        return QueryFailed(
            "StoreError",
            f"the query process ended while running the query ({queryproc.exit_status(code)}): it needed more memory than "
            f"store.query_memory_limit ({self._box.options.query_memory_limit}) allows, or it crashed",
            recycle=True,
        )

    def kill(self) -> None:
        self._process.kill()

    def close(self) -> None:
        self._chan.close()  # the process exits at the end of its socket
        try:
            self._process.wait(5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


class QueryBox:
    """Worker threads, each with a query process, serving the store's QUERY requests (see the module docstring)."""

    def __init__(
        self,
        options: EngineOptions,
        cursor: Callable[[], Connection],
        reply: Reply,
        on_scan_error: Callable[[BaseException], None],
    ) -> None:
        self.options = options
        self.cursor = cursor
        self._reply = reply
        self._on_scan_error = on_scan_error
        self._jobs: queue.Queue[tuple[int, Any] | None] = queue.Queue()
        self._workers: list[threading.Thread] = []
        self._processes: set[_QueryProcess] = set()
        self._lock = threading.Lock()
        self._hello: tuple[Any, ...] | None = None
        self._columns: dict[str, list[str]] = {}
        self._closing = False

    def start(self) -> None:
        for i in range(self.options.query_max_concurrent):
            worker = threading.Thread(target=self._work, name=f"store-query-{i}", daemon=True)
            worker.start()
            self._workers.append(worker)

    def submit(self, req_id: int, payload: Any) -> None:
        if self._closing:
            self._reply(req_id, False, Failure("StoreClosed", "store is shutting down"), {})
            return
        self._jobs.put((req_id, payload))

    def stop(self, deadline: float) -> None:
        """Refuse new queries, end the running ones (their processes are killed), join the workers."""
        self._closing = True
        with self._lock:
            for process in self._processes:
                process.kill()
        for _ in self._workers:
            self._jobs.put(None)
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))

    def hello(self) -> tuple[Any, ...]:
        """What a new query process is told: each table's name and Arrow schema."""
        with self._lock:
            if self._hello is None:
                cur = self.cursor()
                try:
                    catalog = []
                    for name in sorted(readonly.readable_tables(cur)):
                        schema = cur.sql(f"SELECT * FROM {layout.quote(name)} LIMIT 0").to_arrow_table().schema
                        self._columns[name] = list(schema.names)
                        catalog.append((name, pickle.dumps(schema)))
                finally:
                    cur.close()
                self._hello = ("hello", catalog)
            return self._hello

    def columns(self, table: str) -> list[str]:
        self.hello()
        return self._columns[table.lower()]

    def _work(self) -> None:
        _lower_priority()
        process: _QueryProcess | None = None
        while (job := self._jobs.get()) is not None:
            req_id, (sql, max_rows, timeout_s, params) = job
            if self._closing:
                self._reply(req_id, False, Failure("StoreClosed", "store is shutting down"), {})
                continue
            store_error: BaseException | None = None
            try:
                if process is None:
                    process = _QueryProcess(self)
                    with self._lock:
                        self._processes.add(process)
                result = process.query(sql, list(params), max_rows, timeout_s)
            except QueryFailed as exc:
                self._reply(req_id, False, Failure(exc.kind, str(exc)), {})
                if exc.recycle and process is not None:
                    self._retire(process)
                    process = None
            except Exception as exc:  # reported to the caller: the worker serves the next query
                if isinstance(exc, duckdb.Error):
                    store_error = exc
                else:
                    log.exception("query failed in the query box")
                self._reply(req_id, False, Failure("StoreError", f"query failed: {exc}"), {})
                if process is not None:
                    self._retire(process)
                    process = None
            else:
                self._reply(req_id, True, result, {})
            if process is not None and process.store_error is not None:
                store_error = process.store_error
            if store_error is not None:
                self._on_scan_error(store_error)  # a database DuckDB invalidated ends the store process here
        if process is not None:
            self._retire(process)

    def _retire(self, process: _QueryProcess) -> None:
        with self._lock:
            self._processes.discard(process)
        process.close()
