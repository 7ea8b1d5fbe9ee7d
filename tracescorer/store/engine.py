"""The store process: the one place that holds the DuckDB connection of a running daemon.

It runs beside the daemon (its own process, so DuckDB's work and the daemon's decoding and
scoring use both cores instead of taking turns on one GIL). The daemon sends it requests over a
socketpair (:mod:`tracescorer.store.ipc`):

* telemetry appends go to the **telemetry writer**, which takes whatever is queued and commits
  it in one transaction (group commit); each request is answered only after its transaction
  committed, so nothing unacknowledged is reported as stored;
* the pipeline's own writes (runs, scores, decisions, ...) go the same way through the **stage
  writer**, on its own connection: DuckDB runs the two transactions side by side (they touch
  different rows), so a client's acknowledgement never waits behind a large stage write;
* reads and read-only queries go to a small pool of **reader threads**, each on its own cursor,
  so a long query never holds up commits.

A failed transaction is rolled back and its jobs are retried one by one, so one bad job fails
alone; a telemetry job whose rows the database refuses for their values is split until the bad
rows are found, the good ones are stored and the bad ones are reported back as rejected.

The process ignores SIGINT/SIGTERM: the daemon decides when to stop and sends ``close``; when
the daemon disappears (its end of the socket closes), queued work is committed and the process
exits.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import duckdb
import pyarrow as pa

from tracescorer import logs
from tracescorer.sizes import size_bytes
from tracescorer.store import appends, layout, readonly
from tracescorer.store.ipc import BlockingChannel, enlarge_buffers
from tracescorer.store.migrations import migrate
from tracescorer.store.wire import CLOSE, EXIT_INVALIDATED, QUERY, READ, TELEMETRY, WRITE, EngineOptions, Failure

log = logging.getLogger("tracescorer.store.engine")  # run as __main__ in the store process

Connection = duckdb.DuckDBPyConnection

#: a checkpoint this long is logged: the commits of its database (acknowledgements, for a span log) waited for it
SLOW_CHECKPOINT_S = 2.0

# Exceptions that say "this data cannot be stored" (the client's fault), not "the database is
# unwell" (retry later).
_DATA_ERRORS: tuple[type[BaseException], ...] = (
    duckdb.ConversionException,
    duckdb.OutOfRangeException,
    duckdb.InvalidInputException,
    duckdb.ConstraintException,
    duckdb.TypeMismatchException,
    pa.ArrowInvalid,
    pa.ArrowTypeError,
    OverflowError,
    TypeError,
    UnicodeError,
)


def _config(options: EngineOptions) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "memory_limit": options.memory_limit,
        # checkpoints run beside the writer (Engine._checkpointer): DuckDB's own, inside a commit,
        # stalls every write for the checkpoint's length; it stays only as a safety net
        "checkpoint_threshold": f"{4 * size_bytes(options.checkpoint_threshold)}B",
    }
    if options.path != ":memory:":
        # where DuckDB spills what does not fit memory_limit: beside the file, as DuckDB does for a
        # database it opens itself (the main database is attached to an in-memory one, whose default
        # is ".tmp" in the working directory)
        cfg["temp_directory"] = f"{options.path}.tmp"
    if options.duckdb_threads:
        cfg["threads"] = options.duckdb_threads
    if options.compression != "auto":
        cfg["force_compression"] = options.compression
    cfg.update(options.settings)
    return cfg


def _says_invalidated(exc: BaseException) -> bool:
    return isinstance(exc, duckdb.FatalException) or "has been invalidated" in str(exc)


@dataclass(slots=True, eq=False)
class _Job:
    req_id: int
    kind: str
    items: int
    payload: Any
    arrow: tuple[pa.Table | None, pa.Table | None] | None = None
    queued_at: float = 0.0


def _drop_hints(job: _Job) -> bool:
    """Turn a :func:`tracescorer.store.ops.hinted` write that believed some keys new into the
    same write believing none (True), for a retry after a primary-key violation; False otherwise."""
    count = getattr(job.payload[0], "hinted", 0) if job.kind == WRITE else 0
    if not count:
        return False
    fn, args = job.payload
    cut = len(args) - count
    if not any(any(hints) for hints in args[cut:]):
        return False
    job.payload = (fn, (*args[:cut], *([False] * len(hints) for hints in args[cut:])))
    return True


def _alone(job: _Job) -> bool:
    """A write that gets a transaction of its own (:func:`tracescorer.store.ops.alone`)."""
    return job.kind == WRITE and getattr(job.payload[0], "alone", False)


@dataclass(slots=True)
class _WriteQueue:
    jobs: deque[_Job] = field(default_factory=deque)
    cond: threading.Condition = field(default_factory=threading.Condition)
    closing: bool = False
    delay_s: float = 0.0  # how long the oldest job waits for others to commit with


def _open(options: EngineOptions) -> Connection:
    if options.path != ":memory:":
        parent = os.path.dirname(os.path.abspath(options.path))
        if not os.path.isdir(parent):
            raise FileNotFoundError(f"directory {parent} does not exist")
    # A daemon killed a moment ago may still be releasing the file: retry the lock briefly.
    deadline = time.monotonic() + 10.0
    while True:
        try:
            con = layout.connect(options.path, _config(options))
            try:
                layout.attach(con, options.path)
            except BaseException:
                con.close()
                raise
            break
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    migrate(con)
    # the lockdown of query connections holds for the whole database the daemon serves (set
    # once the span log is attached: ATTACH is file access)
    readonly.lock_down(con)
    return con


class Engine:
    """The connection, the writer thread and the reader pool (see the module docstring)."""

    def __init__(self, options: EngineOptions, reply: Callable[[int, bool, Any, dict[str, Any]], None]) -> None:
        self.options = options
        self._reply = reply
        self._con = _open(options)
        self._catalog = layout.main_catalog(self._con)
        self._telemetry = _WriteQueue()
        # a results commit has a fixed cost of several ms (statements per table, the commit): results
        # writes wait a little to be committed together; nothing acknowledged to a client waits for it
        self._stage = _WriteQueue(delay_s=options.results_delay_s)
        self._reads: queue.Queue[tuple[int, str, Any] | None] = queue.Queue()
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

    def _cursor(self) -> Connection:
        """A cursor of the connection in the main catalog (see :func:`tracescorer.store.layout.connect`)."""
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

    def _checkpointer(self) -> None:
        """Checkpoint each database once its WAL passes the threshold, on a cursor of its own and
        outside the writers' commits (DuckDB's own checkpoint runs inside a commit). A checkpoint
        holds the commits of its database for its length: a span log is checkpointed only after
        telemetry has moved to the other one (see :mod:`tracescorer.store.layout`)."""
        threshold = size_bytes(self.options.checkpoint_threshold)
        cur = self._cursor()  # the telemetry writer uses the connection itself
        try:
            catalogs = [*layout.SPAN_LOGS, self._catalog]
            wals = [(catalog, wal) for catalog in catalogs if (wal := layout.wal_of(cur, catalog))]
        finally:
            cur.close()
        while not self._telemetry.closing:
            time.sleep(0.5)
            for catalog, wal in wals:
                try:
                    if os.path.getsize(wal) < threshold:
                        continue
                except OSError:
                    continue
                if catalog in layout.SPAN_LOGS and not self._move_appends_off(catalog):
                    continue
                self._checkpoint(catalog)

    def _move_appends_off(self, catalog: str, timeout_s: float = 5.0) -> bool:
        """Send telemetry to the other span log; True once no telemetry transaction is open on ``catalog``."""
        with self._logs:
            if self._log_target == catalog:
                self._log_target = next(c for c in layout.SPAN_LOGS if c != catalog)
            return self._logs.wait_for(lambda: self._log_in_use != catalog, timeout_s)

    def _claim_log(self) -> str:
        with self._logs:
            self._log_in_use = self._log_target
            return self._log_target

    def _release_log(self) -> None:
        with self._logs:
            self._log_in_use = None
            self._logs.notify_all()

    def _checkpoint(self, catalog: str) -> None:
        started = time.perf_counter()
        try:
            cur = self._cursor()
            try:
                cur.execute(f"CHECKPOINT {layout.quote(catalog)}")
            finally:
                cur.close()
        except duckdb.Error as exc:  # a conflicting transaction: try again later
            if self._invalidated(exc):  # a full disk, say: the database is unusable until opened again
                self._exit_invalidated(exc)
            log.debug("checkpoint of %s skipped: %s", catalog, exc)
            return
        seconds = time.perf_counter() - started
        database = "span_log" if catalog in layout.SPAN_LOGS else "main"
        if seconds >= SLOW_CHECKPOINT_S:  # its database's commits waited meanwhile
            log.warning("checkpoint of the %s database (%s) took %.1f s", database, catalog, seconds)
        with self._checkpoints_lock:
            self._checkpoints.append((database, seconds))

    def shutdown(self, timeout_s: float) -> bool:
        """Commit what is queued (until the deadline), stop the readers, checkpoint, close."""
        deadline = time.monotonic() + timeout_s
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
            try:
                for catalog in (*layout.SPAN_LOGS, self._catalog):
                    self._con.execute(f"CHECKPOINT {layout.quote(catalog)}")
            except duckdb.Error as exc:
                log.warning("checkpoint at close failed: %s", exc)
            self._con.close()
        return drained

    # --- intake ---------------------------------------------------------------------------------

    def dispatch(self, req_id: int, kind: str, payload: Any) -> None:
        if kind in (READ, QUERY):
            self._reads.put((req_id, kind, payload))
            return
        items = 1
        if kind == TELEMETRY:
            span_rows, log_rows = payload
            items = max(1, len(span_rows or ()) + len(log_rows or ()))
        # an op may ask for the telemetry writer (tests hold that writer to fill its queue)
        on_telemetry = kind == TELEMETRY or getattr(payload[0], "telemetry_writer", False)
        q = self._telemetry if on_telemetry else self._stage
        with q.cond:
            if q.closing:
                self._reply(req_id, False, Failure("StoreClosed", "store is shutting down"), {})
                return
            q.jobs.append(_Job(req_id, kind, items, payload, queued_at=time.monotonic()))
            q.cond.notify()

    # --- writer ---------------------------------------------------------------------------------

    def _take(self, q: _WriteQueue) -> list[_Job] | None:
        with q.cond:
            while not q.jobs and not q.closing:
                q.cond.wait()
            if not q.jobs:
                return None
            if q.delay_s:
                until = q.jobs[0].queued_at + q.delay_s
                while (
                    not q.closing
                    and sum(job.items for job in q.jobs) < self.options.max_batch_items
                    and (left := until - time.monotonic()) > 0
                ):
                    q.cond.wait(left)
            batch = [q.jobs.popleft()]
            if _alone(batch[0]):
                return batch
            size = batch[0].items
            while q.jobs and size + q.jobs[0].items <= self.options.max_batch_items and not _alone(q.jobs[0]):
                job = q.jobs.popleft()
                size += job.items
                batch.append(job)
            return batch

    def _writer(self, q: _WriteQueue, own_cursor: bool) -> None:
        while (batch := self._take(q)) is not None:
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

    def _prepare(self, batch: list[_Job]) -> None:
        """Columns -> Arrow per telemetry job, before the transaction: a job whose values do not
        convert is split right here, without touching the database."""
        for job in batch:
            if job.kind == TELEMETRY and job.arrow is None:
                span_rows, log_rows = job.payload
                try:
                    job.arrow = (
                        appends.span_table(span_rows) if span_rows else None,
                        appends.log_table(log_rows) if log_rows else None,
                    )
                except _DATA_ERRORS:
                    job.arrow = None

    def _meta(self) -> dict[str, Any]:
        """The state a reply carries; each checkpoint goes out with one reply only."""
        meta: dict[str, Any] = {"failing": self._failing, "commit_id": self._commit_id}
        if self._checkpoints:
            with self._checkpoints_lock:
                meta["checkpoints"], self._checkpoints = self._checkpoints, []
        return meta

    def _commit(self, batch: list[_Job], con: Connection) -> None:
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
        catalog = self._claim_log() if spans or logs else None
        try:
            con.execute("BEGIN TRANSACTION")
            received = time.time()
            if spans and catalog:
                appends.insert_spans(con, spans, received, catalog)
            if logs and catalog:
                appends.insert_logs(con, logs, received, catalog)
            results = self._run_writes(con, batch)
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
            if isinstance(exc, duckdb.ConstraintException) and _drop_hints(batch[0]):
                log.debug("a key believed new was stored already; writing again without beliefs: %s", exc)
                self._commit(batch, con)
                return
            self._fail(batch[0], exc)
            return
        if catalog:
            self._release_log()
        commit_id = self._commit_id = next(self._commits)
        self._failing = None
        commit = {
            "commit_id": commit_id,
            "commit_s": time.perf_counter() - started,
            "spans": sum(t.num_rows for t in spans),
            "logs": sum(t.num_rows for t in logs),
        }
        for job, result in zip(batch, results, strict=False):
            if job.kind == TELEMETRY:
                result = (job.items, 0, "", received, received)
            self._reply(job.req_id, True, result, {**self._meta(), **commit})

    @staticmethod
    def _run_writes(con: Connection, batch: list[_Job]) -> list[Any]:
        """Run the batch's write jobs; jobs of one coalescable op run as one call (first job's
        place), each getting that call's result."""
        merged: dict[Any, list[_Job]] = {}
        for job in batch:
            if job.kind == WRITE and getattr(job.payload[0], "coalescable", False):
                merged.setdefault(job.payload[0], []).append(job)
        done: dict[int, Any] = {}
        for job in batch:
            if job.kind != WRITE or id(job) in done:
                continue
            fn, args = job.payload
            group = merged.get(fn, [job])
            if len(group) > 1:
                args = tuple([item for j in group for item in j.payload[1][i]] for i in range(len(args)))
            result = fn(con, *args)
            for j in group:
                done[id(j)] = result
        return [done.get(id(job)) for job in batch]

    def _fail(self, job: _Job, exc: BaseException) -> None:
        if isinstance(exc, _DATA_ERRORS):
            if job.kind == TELEMETRY:
                self._isolate(job)
                return
            self._reply(job.req_id, False, Failure("DataError", f"cannot store: {exc}"), self._meta())
            return
        self._failing = f"{type(exc).__name__}: {exc}"
        log.error("write failed: %s", exc)
        self._reply(job.req_id, False, Failure("StoreError", f"write failed: {exc}"), self._meta())

    def _isolate(self, job: _Job) -> None:
        """Store the rows of a telemetry job that can be stored, one half at a time; report the
        rest as rejected (with the first error)."""
        span_rows, log_rows = job.payload
        errors: list[str] = []
        times: list[float] = []
        stored = 0
        try:
            for rows, table_of, insert in (
                (span_rows, appends.span_table, appends.insert_spans),
                (log_rows, appends.log_table, appends.insert_logs),
            ):
                if rows:
                    stored += self._store_halves(rows, table_of, insert, errors, times)
        except duckdb.Error as exc:  # not the data: the database is failing
            self._fail(job, exc)
            return
        self._commit_id = next(self._commits)
        rejected = job.items - stored
        message = f"{rejected} item(s) could not be stored: {errors[0]}" if errors else ""
        now = time.time()
        self._reply(
            job.req_id,
            True,
            (stored, rejected, message, min(times, default=now), max(times, default=now)),
            self._meta(),
        )

    def _store_halves(
        self,
        rows: Sequence[tuple[Any, ...]],
        table_of: Callable[[Sequence[tuple[Any, ...]]], pa.Table],
        insert: Callable[[Connection, Sequence[pa.Table], float, str], None],
        errors: list[str],
        times: list[float],
    ) -> int:
        n = len(rows)
        if n == 0:
            return 0
        try:
            table = table_of(rows)
        except _DATA_ERRORS as exc:
            return self._halve(rows, table_of, insert, errors, times, exc)
        catalog = self._claim_log()
        try:
            self._con.execute("BEGIN TRANSACTION")
            received = time.time()
            insert(self._con, [table], received, catalog)
            self._con.execute("COMMIT")
        except _DATA_ERRORS as exc:
            self._rollback(self._con)
            self._release_log()
            return self._halve(rows, table_of, insert, errors, times, exc)
        except duckdb.Error:
            self._rollback(self._con)
            self._release_log()
            raise
        self._release_log()
        times.append(received)
        return n

    def _halve(
        self,
        rows: Sequence[tuple[Any, ...]],
        table_of: Callable[[Sequence[tuple[Any, ...]]], pa.Table],
        insert: Callable[[Connection, Sequence[pa.Table], float, str], None],
        errors: list[str],
        times: list[float],
        exc: BaseException,
    ) -> int:
        if len(rows) == 1:
            errors.append(str(exc).splitlines()[0][:300])
            return 0
        mid = len(rows) // 2
        return self._store_halves(rows[:mid], table_of, insert, errors, times) + self._store_halves(
            rows[mid:], table_of, insert, errors, times
        )

    @staticmethod
    def _rollback(con: Connection) -> None:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass

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
            req_id, kind, payload = item
            try:
                result = self._read(kind, payload)
            except readonly.QueryRefused as exc:
                self._reply(req_id, False, Failure("ReadOnlyViolation", str(exc)), {})
            except Exception as exc:  # noqa: BLE001 - reported to the caller
                message = str(exc) if isinstance(exc, readonly.QueryError) else f"read failed: {exc}"
                self._reply(req_id, False, Failure("StoreError", message), {})
                if self._invalidated(exc):  # a query error carries DuckDB's message
                    self._exit_invalidated(exc)
            else:
                self._reply(req_id, True, result, {})

    def _read(self, kind: str, payload: Any) -> Any:
        cur = self._cursor()
        try:
            if kind == QUERY:
                sql, max_rows, timeout_s, params = payload
                return readonly.run_guarded(cur, sql, max_rows=max_rows, timeout_s=timeout_s, params=params)
            fn, args = payload
            return fn(cur, *args)
        finally:
            cur.close()


def serve(sock: socket.socket, options: EngineOptions) -> None:
    """Open the database, serve requests from ``sock`` until ``close`` or end of stream."""
    enlarge_buffers(sock)
    chan = BlockingChannel(sock)

    def reply(req_id: int, ok: bool, value: Any, meta: dict[str, Any]) -> None:
        chan.send((req_id, ok, value, meta))

    try:
        engine = Engine(options, reply)
    except Exception as exc:  # noqa: BLE001 - reported to the daemon, which names the file
        chan.send((0, False, Failure("StoreError", f"{type(exc).__name__}: {exc}"), {}))
        chan.close()
        return
    chan.send((0, True, os.getpid(), {}))
    engine.start()
    timeout_s = 30.0
    while (message := chan.recv()) is not None:
        req_id, kind, payload = message
        if kind == CLOSE:
            timeout_s = float(payload)
            break
        engine.dispatch(req_id, kind, payload)
    drained = engine.shutdown(timeout_s)
    chan.send((-1, drained, None, {}))
    chan.close()


def main(argv: list[str] | None = None) -> None:
    """``python -m tracescorer.store.engine --fd N --options JSON`` (started by DuckDBStore)."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="tracescorer-store")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--options", required=True)
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    # the daemon stops this process when it stops; a terminal's SIGHUP reaches the whole group
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    logs.configure(args.log_level, args.log_format)
    serve(socket.socket(fileno=args.fd), EngineOptions(**json.loads(args.options)))


if __name__ == "__main__":
    main()
