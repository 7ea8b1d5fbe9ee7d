"""The one module that holds DuckDB connections.

:class:`DuckDBStore` owns the database file for a running daemon. Every write goes through one
writer thread that takes whatever jobs are waiting and commits them in one transaction (group
commit); a job's future completes only after its transaction committed, so the receiver
acknowledges nothing that is not durable. Intake is bounded by a count of queued items; when it
is full :meth:`DuckDBStore.submit` raises :class:`QueueFull` and the caller pushes back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import duckdb

from tracescorer.model import LogRecord, Span
from tracescorer.store import readonly, rows
from tracescorer.store.readonly import QueryResult
from tracescorer.store.schema import DDL

log = logging.getLogger(__name__)
T = TypeVar("T")
Connection = duckdb.DuckDBPyConnection


class StoreError(RuntimeError):
    """A store operation failed."""


class QueueFull(StoreError):
    """The write queue is full; retry later."""


class StoreClosed(StoreError):
    """The store no longer accepts writes (shutting down)."""


class ReadOnlyViolation(StoreError):
    """A statement other than a read was given to a read-only query."""


class CommitObserver(Protocol):
    """Told about every committed transaction (called on the writer thread; must not block)."""

    def on_commit(self, seconds: float, spans: int, logs: int) -> None: ...

    def on_error(self, error: BaseException) -> None: ...


class _NullObserver:
    def on_commit(self, seconds: float, spans: int, logs: int) -> None:
        pass

    def on_error(self, error: BaseException) -> None:
        pass


@dataclass(slots=True, eq=False)
class _Job:
    future: Future[Any]
    items: int
    span_cols: list[list[Any]] | None = None
    log_cols: list[list[Any]] | None = None
    spans: int = 0
    logs: int = 0
    fn: Callable[[Connection], Any] | None = None


@dataclass(slots=True)
class _Queue:
    jobs: deque[_Job] = field(default_factory=deque)
    items: int = 0


class DuckDBStore:
    """A DuckDB database file with a single group-committing writer thread."""

    def __init__(
        self,
        path: str | Path,
        *,
        max_queue_items: int = 50_000,
        max_batch_items: int = 20_000,
        observer: CommitObserver | None = None,
        extra_ddl: Sequence[str] = (),
        memory_limit: str = "1GB",
        checkpoint_threshold: str = "64MB",
    ) -> None:
        self.path = str(path)
        self.max_queue_items = max_queue_items
        self.max_batch_items = max_batch_items
        self._observer = observer or _NullObserver()
        self._extra_ddl = tuple(extra_ddl)
        self._settings: dict[str, str | bool | int | float | list[str]] = {
            "memory_limit": memory_limit,
            "checkpoint_threshold": checkpoint_threshold,
        }
        self._queue = _Queue()
        self._cond = threading.Condition()
        self._closing = False
        self._con: Connection | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        """Open (creating if needed) the database and start the writer thread."""
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = duckdb.connect(self.path, config=self._settings)
        except duckdb.Error as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}") from None
        for statement in (*DDL, *self._extra_ddl):
            self._con.execute(statement)
        self._thread = threading.Thread(target=self._writer, name="duckdb-writer", daemon=True)
        self._thread.start()

    def close(self, timeout_s: float = 30.0) -> bool:
        """Stop intake, commit everything queued (until the deadline), checkpoint, close.

        Returns False when queued work could not be committed before the deadline (its futures
        fail, so nothing unacknowledged is reported as stored).
        """
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        drained = True
        if self._thread is not None:
            self._thread.join(timeout_s)
            drained = not self._thread.is_alive()
        if not drained:
            log.error("writer did not drain within %.1fs; %d items not committed", timeout_s, self.queue_items)
            return False
        if self._con is not None:
            try:
                self._con.execute("CHECKPOINT")
            except duckdb.Error as exc:
                log.warning("checkpoint at close failed: %s", exc)
            self._con.close()
            self._con = None
        return True

    @property
    def queue_items(self) -> int:
        return self._queue.items

    @property
    def accepting(self) -> bool:
        return not self._closing and self._thread is not None and self._thread.is_alive()

    # --- writes ------------------------------------------------------------------------------

    def _enqueue(self, job: _Job, *, bounded: bool) -> None:
        with self._cond:
            if self._closing or self._thread is None:
                raise StoreClosed("store is shutting down")
            # An oversized request is still admitted into an empty queue, so it can make progress.
            if bounded and self._queue.items and self._queue.items + job.items > self.max_queue_items:
                raise QueueFull(f"write queue full ({self._queue.items} items waiting)")
            self._queue.jobs.append(job)
            self._queue.items += job.items
            self._cond.notify()

    def submit_telemetry(self, spans: Sequence[Span], logs: Sequence[LogRecord] = ()) -> Future[None]:
        """Queue spans/log records; the future completes once they are committed.

        Rows are converted here, on the caller's thread, so the writer thread spends its time in
        DuckDB (which releases the GIL) and the two overlap.
        """
        future: Future[None] = Future()
        job = _Job(
            future,
            max(1, len(spans) + len(logs)),
            span_cols=rows.span_columns(spans) if spans else None,
            log_cols=rows.log_columns(logs) if logs else None,
            spans=len(spans),
            logs=len(logs),
        )
        self._enqueue(job, bounded=True)
        return future

    def submit(self, fn: Callable[[Connection], T], items: int = 1) -> Future[T]:
        """Run ``fn(connection)`` on the writer thread inside a group-committed transaction.

        Only telemetry intake is refused when the queue is full: these jobs come from the
        daemon's own stages (runs, scores, export marks), each bounded by its own queue, and
        refusing them would lose work that was already acknowledged upstream.
        """
        future: Future[T] = Future()
        self._enqueue(_Job(future, items, fn=fn), bounded=False)
        return future

    def _take(self) -> list[_Job] | None:
        with self._cond:
            while not self._queue.jobs and not self._closing:
                self._cond.wait()
            if not self._queue.jobs:
                return None
            batch = [self._queue.jobs.popleft()]
            size = batch[0].items
            while self._queue.jobs and size + self._queue.jobs[0].items <= self.max_batch_items:
                job = self._queue.jobs.popleft()
                size += job.items
                batch.append(job)
            return batch

    def _done(self, batch: list[_Job]) -> None:
        with self._cond:
            self._queue.items -= sum(job.items for job in batch)

    def _writer(self) -> None:
        while (batch := self._take()) is not None:
            # A future cancelled while queued is dropped; a running one can no longer be cancelled.
            live = [job for job in batch if job.future.set_running_or_notify_cancel()]
            if live:
                self._commit(live)
            self._done(batch)

    def _commit(self, batch: list[_Job]) -> None:
        con = self._con
        assert con is not None
        started = time.perf_counter()
        span_cols = rows.concat_columns([job.span_cols for job in batch if job.span_cols])
        log_cols = rows.concat_columns([job.log_cols for job in batch if job.log_cols])
        results: list[Any] = []
        statements = [(sql, cols) for sql, cols in ((rows.SPAN_INSERT, span_cols), (rows.LOG_INSERT, log_cols)) if cols]
        # One statement alone runs as its own (auto-commit) transaction: every execute() call has
        # to win the GIL back from the event loop, so fewer calls means much less waiting.
        single = len(statements) == 1 and all(job.fn is None for job in batch)
        try:
            if single:
                con.execute(*statements[0])
                results = [None] * len(batch)
            else:
                con.execute("BEGIN TRANSACTION")
                for sql, cols in statements:
                    con.execute(sql, cols)
                for job in batch:
                    results.append(job.fn(con) if job.fn is not None else None)
                con.execute("COMMIT")
        except Exception as exc:  # noqa: BLE001 - any failure: roll back, then isolate the bad job
            if not single:
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error:
                    pass
            if len(batch) > 1:
                for job in batch:
                    self._commit([job])
                return
            self._observer.on_error(exc)
            log.error("write failed: %s", exc)
            batch[0].future.set_exception(StoreError(f"write failed: {exc}"))
            return
        self._observer.on_commit(
            time.perf_counter() - started, sum(job.spans for job in batch), sum(job.logs for job in batch)
        )
        for job, result in zip(batch, results):
            job.future.set_result(result)

    # --- reads -------------------------------------------------------------------------------

    def cursor(self) -> Connection:
        """A new cursor on the open database, for reads on the caller's thread."""
        if self._con is None:
            raise StoreClosed("store is not open")
        return self._con.cursor()

    def read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` with a fresh read cursor (sees committed data only)."""
        cur = self.cursor()
        try:
            return fn(cur)
        finally:
            cur.close()

    def query(self, sql: str, *, max_rows: int, timeout_s: float) -> QueryResult:
        """Run one read-only statement with a row limit and a timeout."""
        cur = self.cursor()
        try:
            return run_read_query(cur, sql, max_rows=max_rows, timeout_s=timeout_s)
        finally:
            cur.close()


# --- read-only access (CLI without a running daemon) -----------------------------------------------


def check_read_only(con: Connection, sql: str) -> None:
    """Raise :class:`ReadOnlyViolation` unless ``sql`` is one SELECT over the database's own
    tables (the guard of :mod:`tracescorer.store.readonly`)."""
    try:
        readonly.check_statement(con, sql)
    except readonly.QueryRefused as exc:
        raise ReadOnlyViolation(str(exc)) from None
    except readonly.QueryError as exc:
        raise StoreError(str(exc)) from None


def run_read_query(con: Connection, sql: str, *, max_rows: int, timeout_s: float) -> QueryResult:
    """Validate and run a read statement (:func:`tracescorer.store.readonly.run_guarded`)."""
    try:
        return readonly.run_guarded(con, sql, max_rows=max_rows, timeout_s=timeout_s)
    except readonly.QueryRefused as exc:
        raise ReadOnlyViolation(str(exc)) from None
    except readonly.QueryError as exc:
        raise StoreError(str(exc)) from None


def open_read_only(path: str | Path) -> Connection:
    """Open a database file read-only (fails while a daemon holds it open for writing)."""
    if not Path(path).exists():
        raise StoreError(f"database {path} does not exist")
    try:
        return duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise StoreError(f"cannot open {path} read-only: {exc}") from None
