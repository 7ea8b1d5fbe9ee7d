"""The store process: the one place that holds the DuckDB connection of a running daemon.

It runs beside the daemon (its own process, so DuckDB's work and the daemon's decoding and
scoring use both cores instead of taking turns on one GIL). The daemon sends it requests over a
socketpair (:mod:`tracescorer.ipc`):

* telemetry appends go to the **telemetry writer**, which takes whatever is queued and commits
  it in one transaction (group commit); each request is answered only after its transaction
  committed, so nothing unacknowledged is reported as stored;
* the pipeline's own writes (runs, scores, decisions, ...) go the same way through the **stage
  writer**, on its own connection: DuckDB runs the two transactions side by side (they touch
  different rows), so a client's acknowledgement never waits behind a large stage write;
* the pipeline's reads go to a small pool of **reader threads**, each on its own cursor;
* read-only queries go to the **query box** (:mod:`tracescorer.store.duckdb.querybox`).

The writers' queues, how a writer takes a batch and how a batch's writes run are in
:mod:`tracescorer.store.duckdb.batches`; checkpoints and refused telemetry are the mixins
:mod:`~tracescorer.store.duckdb.checkpoints` and :mod:`~tracescorer.store.duckdb.rejects`. Below
the disk reserve (:mod:`tracescorer.store.duckdb.space`) nothing is committed nor checkpointed:
the writers wait for space (a job a little while, then it is refused as retryable), and go on by
themselves once it is back.

A failed transaction is rolled back and its jobs are retried one by one, so one bad job fails
alone; a telemetry job whose rows the database refuses for their values is split until the bad
rows are found, the good ones are stored and the bad ones are reported back as rejected.

The daemon decides when the process stops: ``close``, or its end of the socket going away
(:mod:`tracescorer.store.duckdb.server`); queued work is committed either way.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

import duckdb

from tracescorer.store.duckdb import appends, feedmarks, layout
from tracescorer.store.duckdb.batches import Job, WriteQueue, drop_hints, run_writes
from tracescorer.store.duckdb.checkpoints import Checkpoints
from tracescorer.store.duckdb.database import open_database
from tracescorer.store.duckdb.querybox import QueryBox
from tracescorer.store.duckdb.rejects import DATA_ERRORS, Rejects
from tracescorer.store.duckdb.space import WAIT_S, DiskReserve
from tracescorer.store.duckdb.wire import EXIT_INVALIDATED, QUERY, READ, TELEMETRY, EngineOptions, Failure

log = logging.getLogger("tracescorer.store.duckdb.engine")  # run as __main__ in the store process

Connection = duckdb.DuckDBPyConnection


def _consumer_marks(batch: list[Job]) -> dict[str, int]:
    """Each consumer's largest log offset among the telemetry rows of a batch
    (:mod:`tracescorer.store.duckdb.feedmarks`)."""
    marks: dict[str, int] = {}
    for job in batch:
        if job.kind == TELEMETRY:
            span_rows, log_rows, skipped_rows, consumer = job.payload
            feedmarks.merge(
                marks,
                consumer,
                feedmarks.largest_offset((*(span_rows or ()), *(log_rows or ()), *(skipped_rows or ()))),
            )
    return marks


def _says_invalidated(exc: BaseException) -> bool:
    return isinstance(exc, duckdb.FatalException) or "has been invalidated" in str(exc)


class Engine(Checkpoints, Rejects):
    """The connection, the writer thread and the reader pool (see the module docstring)."""

    def __init__(self, options: EngineOptions, reply: Callable[[int, bool, Any, dict[str, Any]], None]) -> None:
        self.options = options
        self._reply = reply
        self._con = open_database(options)
        self._catalog = layout.main_catalog(self._con)
        feedmarks.create_tables(self._con)
        self._telemetry = WriteQueue()
        # a results commit has a fixed cost of several ms (statements per table, the commit): results
        # writes wait a little to be committed together; nothing acknowledged to a client waits for it
        self._stage = WriteQueue(delay_s=options.results_delay_s)
        self._reads: queue.Queue[tuple[int, Any] | None] = queue.Queue()
        self._box = QueryBox(options, self._cursor, reply, self._scan_failed)
        self._threads: list[threading.Thread] = []
        self._commits = itertools.count(1)  # next() is atomic: both writers count
        self._commit_id = 0
        self._failing: str | None = None
        # the span log telemetry is appended to, and the one a telemetry transaction is open on:
        # the checkpointer moves appends to the other span log and checkpoints this one once free
        self._logs = threading.Condition()
        self._log_target = layout.SPAN_LOGS[0]
        self._log_in_use: str | None = None
        # (database, seconds) of checkpoints not reported yet: they go out with the next reply
        self._checkpoints: list[tuple[str, float]] = []
        self._checkpoints_lock = threading.Lock()
        self._stopping = threading.Event()
        self._reserve = DiskReserve(None if options.path == ":memory:" else options.path, options.min_free_bytes)

    def _cursor(self) -> Connection:
        """A cursor of the connection in the main catalog (see :func:`tracescorer.store.duckdb.layout.connect`)."""
        return layout.use(self._con.cursor(), self._catalog)

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        self._threads.append(
            threading.Thread(
                target=self._writer, args=(self._telemetry, False), name="store-telemetry-writer", daemon=True
            )
        )
        self._threads.append(
            threading.Thread(target=self._writer, args=(self._stage, True), name="store-stage-writer", daemon=True)
        )
        for i in range(self.options.readers):
            self._threads.append(threading.Thread(target=self._reader, name=f"store-reader-{i}", daemon=True))
        if self.options.path != ":memory:":  # joined at shutdown too: it must not checkpoint a closed database
            self._threads.append(threading.Thread(target=self._checkpointer, name="store-checkpointer", daemon=True))
        for thread in self._threads:
            thread.start()
        self._box.start()

    def shutdown(self, timeout_s: float) -> bool:
        """Commit what is queued (until the deadline), stop the readers, checkpoint, close."""
        deadline = time.monotonic() + timeout_s
        self._stopping.set()
        self._box.stop(deadline)
        for q in (self._telemetry, self._stage):
            with q.cond:
                q.closing = True
                q.cond.notify_all()
        for _ in range(self.options.readers):
            self._reads.put(None)
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        drained = not any(t.is_alive() for t in self._threads)
        if drained:
            if self._reserve.short():
                # a checkpoint failing for space would invalidate its database, and DuckDB
                # checkpoints each database it closes: left open, the process exits without
                log.warning(
                    "not checkpointed at close: the disk of %s has %d bytes free (the WALs are replayed at the next start)",
                    self.options.path,
                    self._reserve.free(),
                )
                return drained
            try:
                for catalog in (*layout.SPAN_LOGS, self._catalog):
                    self._con.execute(f"CHECKPOINT {layout.quote(catalog)}")
            except duckdb.Error as exc:
                log.warning("checkpoint at close failed: %s", exc)
            self._con.close()
        return drained

    # --- intake ---------------------------------------------------------------------------------

    def dispatch(self, req_id: int, kind: str, payload: Any) -> None:
        if kind == QUERY:
            return self._box.submit(req_id, payload)
        if kind == READ:
            return self._reads.put((req_id, payload))
        items = 1
        if kind == TELEMETRY:
            span_rows, log_rows = payload[0], payload[1]
            items = max(1, len(span_rows or ()) + len(log_rows or ()))
        # an op may ask for the telemetry writer (tests hold that writer to fill its queue)
        on_telemetry = kind == TELEMETRY or getattr(payload[0], "telemetry_writer", False)
        q = self._telemetry if on_telemetry else self._stage
        with q.cond:
            if q.closing:
                self._reply(req_id, False, Failure("StoreClosed", "store is shutting down"), {})
                return
            q.jobs.append(Job(req_id, kind, items, payload, queued_at=time.monotonic()))
            q.cond.notify()

    # --- writer ---------------------------------------------------------------------------------

    def _writer(self, q: WriteQueue, own_cursor: bool) -> None:
        while (batch := q.take(self.options.max_batch_items)) is not None:
            if not (batch := self._with_room(batch)):
                continue
            try:
                # the stage writer's transactions run beside the telemetry writer's on a cursor
                # of their own, a fresh one per batch
                con = self._cursor() if own_cursor else self._con
                try:
                    self._prepare(batch)
                    self._commit(batch, con)
                finally:
                    if own_cursor:
                        try:
                            con.close()
                        except duckdb.Error:
                            pass  # closing a cursor must not stop the writer
            except BaseException as exc:  # the writer must outlive anything a job does
                log.exception("writer failed")
                for job in batch:
                    self._reply(job.req_id, False, Failure("StoreError", f"write failed: {exc}"), self._meta())

    def _with_room(self, batch: list[Job]) -> list[Job]:
        """The jobs of ``batch`` to commit once the disk has the store's reserve free
        (:mod:`tracescorer.store.duckdb.space`); those that waited ``WAIT_S`` for it, and at a stop
        all still waiting, are refused as retryable (their callers try again)."""
        while batch and not self._reserve.wait(self._stopping, min(job.queued_at for job in batch) + WAIT_S):
            now, waiting = time.monotonic(), []
            for job in batch:
                if self._stopping.is_set() or now - job.queued_at >= WAIT_S:
                    self._reply(job.req_id, False, Failure("StoreUnavailable", self._reserve.describe()), self._meta())
                else:
                    waiting.append(job)
            batch = waiting
        return batch

    def _prepare(self, batch: list[Job]) -> None:
        """Columns -> Arrow per telemetry job, before the transaction: a job whose values do not
        convert is split right here, without touching the database."""
        for job in batch:
            if job.kind == TELEMETRY and job.arrow is None:
                span_rows, log_rows, skipped_rows = job.payload[:3]
                try:
                    job.arrow = (
                        appends.span_table(span_rows) if span_rows else None,
                        appends.log_table(log_rows) if log_rows else None,
                        appends.skipped_table(skipped_rows) if skipped_rows else None,
                    )
                except DATA_ERRORS:
                    job.arrow = None

    def _meta(self) -> dict[str, Any]:
        """The state a reply carries; each checkpoint goes out with one reply only."""
        meta: dict[str, Any] = {"failing": self._failing, "commit_id": self._commit_id}
        if self._checkpoints:
            with self._checkpoints_lock:
                meta["checkpoints"], self._checkpoints = self._checkpoints, []
        return meta

    def _commit(self, batch: list[Job], con: Connection) -> None:
        if any(job.kind == TELEMETRY and job.arrow is None for job in batch):
            good = [job for job in batch if not (job.kind == TELEMETRY and job.arrow is None)]
            for job in batch:
                if job not in good:
                    self._isolate(job)
            if good:
                self._commit(good, con)
            return
        started = time.perf_counter()
        results: list[Any] = []
        spans = [job.arrow[0] for job in batch if job.arrow is not None and job.arrow[0] is not None]
        logs = [job.arrow[1] for job in batch if job.arrow is not None and job.arrow[1] is not None]
        skipped = [job.arrow[2] for job in batch if job.arrow is not None and job.arrow[2] is not None]
        catalog = self._claim_log() if spans or logs or skipped else None
        try:
            con.execute("BEGIN TRANSACTION")
            received = time.time()
            if spans and catalog:
                appends.insert_spans(con, spans, received, catalog)
            if logs and catalog:
                appends.insert_logs(con, logs, received, catalog)
            if skipped and catalog:
                appends.insert_skipped(con, skipped, received, catalog)
            if catalog and (marks := _consumer_marks(batch)):
                feedmarks.write_marks(con, catalog, marks)  # in the rows' transaction and file
            results = run_writes(con, batch)
            con.execute("COMMIT")
        except Exception as exc:  # noqa: BLE001 - roll back, then find the job that failed
            self._rollback(con)
            if catalog:
                self._release_log()
            if self._invalidated(exc):
                # the database is gone: these jobs fail as retryable (none committed), the process
                # exits, and the daemon fails what else was waiting the same way
                for job in batch:
                    self._reply(job.req_id, False, Failure("StoreError", f"write failed: {exc}"), self._meta())
                self._exit_invalidated(exc)
            if len(batch) > 1:
                for job in batch:
                    self._commit([job], con)
                return
            if isinstance(exc, duckdb.ConstraintException) and drop_hints(batch[0]):
                log.debug("a key believed new was stored already; writing again without beliefs: %s", exc)
                self._commit(batch, con)
                return
            self._fail(batch[0], exc)
            return
        if catalog:
            self._release_log()
        commit_id = self._commit_id = next(self._commits)
        if self._failing is not None:
            log.info("writes succeed again (after: %s)", self._failing)
        self._failing = None
        commit = {
            "commit_id": commit_id,
            "commit_s": time.perf_counter() - started,
            "spans": sum(t.num_rows for t in spans),
            "logs": sum(t.num_rows for t in logs),
        }
        for i, (job, result) in enumerate(zip(batch, results, strict=False)):
            if job.kind == TELEMETRY:
                result = (job.items, 0, "", received, received)
            # the commit goes out with one reply: its jobs may be several clients' (worker
            # processes), each counts what it is told, and the daemon's metrics sum them
            self._reply(job.req_id, True, result, {**self._meta(), **commit} if i == 0 else self._meta())

    def _fail(self, job: Job, exc: BaseException) -> None:
        if isinstance(exc, DATA_ERRORS):
            if job.kind == TELEMETRY:
                self._isolate(job)
                return
            self._reply(job.req_id, False, Failure("DataError", f"cannot store: {exc}"), self._meta())
            return
        failing = f"{type(exc).__name__}: {exc}"
        if failing != self._failing:  # once per streak: callers retry (a full disk fails each try)
            log.error("write failed: %s (not logged again until a write succeeds or fails otherwise)", exc)
        self._failing = failing
        self._reply(job.req_id, False, Failure("StoreError", f"write failed: {exc}"), self._meta())

    def _invalidated(self, exc: BaseException) -> bool:
        """Whether DuckDB refuses every statement on a database of the store from now on: after a
        fatal error, or after a checkpoint failed (on a full disk, say), when it asks for the file
        to be attached again. An error's text may quote data (a span's, a query's), so one that
        says so is confirmed by reading each database."""
        if isinstance(exc, duckdb.FatalException):
            return True
        if not _says_invalidated(exc):
            return False
        try:
            cur = self._cursor()
        except duckdb.Error as probe:
            return _says_invalidated(probe)
        try:
            for catalog, table in ((self._catalog, "schema_info"), *((c, "spans") for c in layout.SPAN_LOGS)):
                cur.execute(f"SELECT 1 FROM {layout.quote(catalog)}.{table} LIMIT 1").fetchall()
        except duckdb.Error as probe:
            return _says_invalidated(probe)
        finally:
            cur.close()
        return False

    def _exit_invalidated(self, cause: BaseException) -> NoReturn:
        """After a fatal error DuckDB refuses every statement, and the file cannot be opened again
        in this process while anything still holds the old database (a reopen failed for good:
        "already attached"): the process exits and the daemon starts a new one, which replays
        the WAL (committed data is there, so nothing acknowledged is lost; unanswered requests
        fail as retryable on the daemon's side)."""
        log.error("database invalidated (%s): the store process exits, the daemon starts it again", cause)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(EXIT_INVALIDATED)

    # --- readers --------------------------------------------------------------------------------

    def _reader(self) -> None:
        while (item := self._reads.get()) is not None:
            req_id, (fn, args) = item
            try:
                cur = self._cursor()
                try:
                    result = fn(cur, *args)
                finally:
                    cur.close()
            except Exception as exc:  # noqa: BLE001 - reported to the caller
                self._reply(req_id, False, Failure("StoreError", f"read failed: {exc}"), {})
                if self._invalidated(exc):
                    self._exit_invalidated(exc)
            else:
                self._reply(req_id, True, result, {})

    def _scan_failed(self, exc: BaseException) -> None:
        if self._invalidated(exc):  # a query box scan met a database DuckDB invalidated
            self._exit_invalidated(exc)
