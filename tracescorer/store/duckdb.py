"""The embedded store: one DuckDB file, owned by a store process beside the daemon.

:class:`DuckDBStore` is the daemon's side of :class:`~tracescorer.store.base.Store`. It starts the
store process (:mod:`tracescorer.store.engine`), sends it telemetry, write jobs and reads over a
socketpair, and resolves each request's future when the answer comes back — a telemetry append
only after its transaction committed. Intake of telemetry is bounded by a count of items not yet
committed (:class:`QueueFull` beyond it); the pipeline's own writes are never refused, because
each comes from a stage with its own bound.

If the store process dies, every pending request fails (nothing unacknowledged is reported as
stored) and a new process is started; requests fail with :class:`StoreError` until it is up.

The module also opens database files read-only for the CLI when no daemon runs.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import logging
import socket
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tracescorer import logs
from tracescorer.model import AgentRun, Conversation, LogRecord, Span
from tracescorer.monitors.evaluator import MonitorState
from tracescorer.sizes import size_bytes
from tracescorer.store import deliveries, keys, layout, monitors, ops, rows, wire
from tracescorer.store.base import (
    AppendOutcome,
    DataError,
    PendingRecovery,
    QueryResult,
    QueueFull,
    ReadOnlyViolation,
    ResultsPruned,
    StoreClosed,
    StoreError,
    TraceData,
)
from tracescorer.store.deliveries import Claim, DeliveryOutcome, DueScore
from tracescorer.store.fresh import NewTraces
from tracescorer.store.ipc import AsyncChannel, encode
from tracescorer.store.monitors import MonitorEvent, Rebuilt, WindowSpec
from tracescorer.store.records import AssemblyRecord, DecisionRecord, ScoreRecord
from tracescorer.store.runs import run_from_row, run_to_row
from tracescorer.store.scores import decision_values, score_values

log = logging.getLogger(__name__)
T = TypeVar("T")

#: How far before the recorded assembly watermark recovery looks (commits in flight, clock steps).
RECOVERY_MARGIN = dt.timedelta(minutes=5)
_WATERMARK = "assembled_through"

_ERRORS: dict[str, type[StoreError]] = {
    "StoreError": StoreError,
    "DataError": DataError,
    "ReadOnlyViolation": ReadOnlyViolation,
    "StoreClosed": StoreClosed,
}


class CommitObserver(Protocol):
    """Told about every committed transaction (on the event loop; must not block)."""

    def on_commit(self, seconds: float, spans: int, logs: int) -> None: ...

    def on_checkpoint(self, database: str, seconds: float) -> None:
        """A checkpoint of ``database`` (``main`` or ``span_log``) finished."""

    def on_error(self, error: BaseException) -> None: ...


class _NullObserver:
    def on_commit(self, seconds: float, spans: int, logs: int) -> None:
        pass

    def on_checkpoint(self, database: str, seconds: float) -> None:
        pass

    def on_error(self, error: BaseException) -> None:
        pass


class DuckDBStore:
    """A DuckDB database file served by a store process (see the module docstring)."""

    def __init__(
        self,
        path: str | Path,
        *,
        max_queue_items: int = 50_000,
        max_batch_items: int = 20_000,
        observer: CommitObserver | None = None,
        memory_limit: str = "1GB",
        checkpoint_threshold: str = "256MB",
        compression: str = "zstd",
        threads: int | None = 1,
        readers: int = 2,
        results_delay_s: float = 0.0,
        index_memory_share: float = 0.4,
        prune_slice_keys: int = 20_000,
        duckdb_settings: Mapping[str, str] | None = None,
    ) -> None:
        self.path = str(path)
        self.max_queue_items = max_queue_items
        self._options = wire.EngineOptions(
            path=self.path,
            memory_limit=memory_limit,
            checkpoint_threshold=checkpoint_threshold,
            max_batch_items=max_batch_items,
            readers=readers,
            compression=compression,
            duckdb_threads=threads,
            results_delay_s=results_delay_s,
            settings=dict(duckdb_settings or {}),
        )
        #: keys the tables' indexes may hold (:mod:`tracescorer.store.keys`)
        self.max_index_keys = keys.max_keys(size_bytes(memory_limit), index_memory_share)
        #: keys one transaction of a retention pass deletes at most (:func:`tracescorer.store.keys.plan_prune`)
        self.prune_slice_keys = prune_slice_keys
        self._observer: CommitObserver = observer or _NullObserver()
        self._ids = itertools.count(1)
        self._futures: dict[int, tuple[asyncio.Future[Any], int]] = {}
        self._pending_items = 0
        self._new_traces = NewTraces()
        self._channel: AsyncChannel | None = None
        self._process: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._restarter: asyncio.Task[None] | None = None
        self._closing = False
        self._open = False
        self._last_commit = 0
        self._failure: str | None = None
        self._closed: asyncio.Future[bool] | None = None
        # per export sink: every score version before this is delivered or failed (deliveries.read_due)
        self._settled: dict[str, int | None] = {}

    # --- lifecycle -------------------------------------------------------------------------------

    async def open(self) -> None:
        """Start the store process and wait until the database is open and migrated."""
        try:
            await self._start_process()
        except StoreError:
            raise
        except OSError as exc:
            raise StoreError(f"cannot start the store process for {self.path}: {exc}") from None
        self._open = True

    async def _start_process(self) -> None:
        parent, child = socket.socketpair()
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tracescorer.store.engine",
                "--fd",
                str(child.fileno()),
                "--options",
                json.dumps(self._options.to_json()),
                "--log-level",
                logging.getLevelName(log.getEffectiveLevel()),
                "--log-format",
                logs.current_format(),
                pass_fds=(child.fileno(),),
                stdin=asyncio.subprocess.DEVNULL,
            )
        finally:
            child.close()
        channel = await AsyncChannel.open(parent)
        first = await channel.recv()
        if first is None or not first[1]:
            channel.close()
            await process.wait()
            why = first[2].message if first is not None else f"the store process exited ({process.returncode})"
            raise StoreError(f"cannot open database {self.path}: {why}")
        self._channel, self._process = channel, process
        self._closed = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read_replies(channel), name="store-replies")
        log.debug("store process %s serving %s", first[2], self.path)

    async def close(self, timeout_s: float = 30.0) -> bool:
        """Stop intake, commit what is queued (until the deadline), checkpoint, close."""
        if self._closing:
            return True
        self._closing = True
        if self._restarter is not None:
            self._restarter.cancel()
        channel, closed = self._channel, self._closed
        drained = True
        if channel is not None and closed is not None and not closed.done():
            channel.send(encode((0, wire.CLOSE, timeout_s)))
            try:
                drained = await asyncio.wait_for(asyncio.shield(closed), timeout_s + 10)
            except TimeoutError:
                drained = False
        if self._process is not None:
            try:
                await asyncio.wait_for(self._process.wait(), 10)
            except TimeoutError:
                log.error("store process did not exit; killing it")
                self._process.kill()
                await self._process.wait()
        if channel is not None:
            channel.close()
        if self._reader is not None:
            self._reader.cancel()
        self._fail_pending(StoreClosed("store is closed"))
        if not drained:
            log.error("store did not drain within %.1fs", timeout_s)
        return bool(drained)

    @property
    def accepting(self) -> bool:
        return self._open and not self._closing and self._channel is not None

    @property
    def pending_items(self) -> int:
        return self._pending_items

    @property
    def write_failure(self) -> str | None:
        return self._failure

    @property
    def process_pid(self) -> int | None:
        return None if self._process is None else int(self._process.pid)

    # --- requests --------------------------------------------------------------------------------

    async def _request(self, kind: str, payload: Any, items: int = 0) -> Any:
        channel = self._channel
        if channel is None or self._closing:
            raise StoreClosed("store is shutting down" if self._closing else "store is not open")
        req_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._futures[req_id] = (future, items)
        self._pending_items += items
        channel.send(encode((req_id, kind, payload)))
        return await future

    async def _read_replies(self, channel: AsyncChannel) -> None:
        while (message := await channel.recv()) is not None:
            req_id, ok, value, meta = message
            if req_id == -1:
                if self._closed is not None and not self._closed.done():
                    self._closed.set_result(bool(ok))
                return
            self._observe(meta)
            entry = self._futures.pop(req_id, None)
            if entry is None:
                continue
            future, items = entry
            self._pending_items -= items
            if future.done():
                continue
            if ok:
                future.set_result(value)
            else:
                error = _ERRORS.get(value.kind, StoreError)(value.message)
                future.set_exception(error)
        # end of stream without a goodbye: the store process died
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(False)
        self._channel = None
        self._failure = "the store process exited"
        self._fail_pending(StoreError("the store process exited; retry"))
        if not self._closing:
            self._restarter = asyncio.create_task(self._restart(), name="store-restart")

    async def _restart(self) -> None:
        status = None
        if self._process is not None:
            try:
                status = await asyncio.wait_for(self._process.wait(), 10)
            except TimeoutError:
                pass
        why = (
            " (DuckDB invalidated its database: see the store's error above)" if status == wire.EXIT_INVALIDATED else ""
        )
        log.error("store process exited unexpectedly with status %s%s; restarting it", status, why)
        delay = 0.5
        while not self._closing:
            try:
                await self._start_process()
                self._failure = None
                log.info("store process restarted")
                return
            except Exception as exc:  # noqa: BLE001 - keep trying; the daemon reports not ready meanwhile
                log.error("cannot restart the store process: %s", exc)
                await asyncio.sleep(delay)
                delay = min(10.0, delay * 2)

    def _observe(self, meta: dict[str, Any]) -> None:
        if not meta:
            return
        failing = meta.get("failing")
        if failing != self._failure:
            if failing is not None:
                self._observer.on_error(StoreError(failing))
            self._failure = failing
        for database, seconds in meta.get("checkpoints", ()):
            self._observer.on_checkpoint(database, seconds)
        commit_id = meta.get("commit_id", 0)
        if "commit_s" in meta and commit_id > self._last_commit:
            self._last_commit = commit_id
            self._observer.on_commit(meta["commit_s"], meta.get("spans", 0), meta.get("logs", 0))

    def _fail_pending(self, error: StoreError) -> None:
        futures, self._futures = self._futures, {}
        self._pending_items = 0
        for future, _ in futures.values():
            if not future.done():
                future.set_exception(error)

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(connection, *args)`` in the store process inside a group-committed write
        transaction; returns its result once committed. ``fn`` must be a module-level function
        and ``args`` picklable."""
        result: T = await self._request(wire.WRITE, (fn, args))
        return result

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(cursor, *args)`` on a read cursor of the store process (committed data only)."""
        result: T = await self._request(wire.READ, (fn, args))
        return result

    # --- SpanLog -----------------------------------------------------------------------------------

    async def append(self, spans: Sequence[Span], logs: Sequence[LogRecord] = ()) -> AppendOutcome:
        span_rows, span_bad = rows.span_rows(spans) if spans else ([], [])
        log_rows, log_bad = rows.log_rows(logs) if logs else ([], [])
        bad = span_bad + log_bad
        items = (len(spans) - len(span_bad)) + (len(logs) - len(log_bad))
        message = "; ".join(m for _, m in bad[:5])
        if items == 0:
            return AppendOutcome(stored=0, rejected=len(bad), message=message)
        if self._closing or self._channel is None:
            raise StoreClosed("store is shutting down" if self._closing else "store is not available")
        # an oversized request is still admitted into an empty queue, so it can make progress
        if self._pending_items and self._pending_items + items > self.max_queue_items:
            raise QueueFull(f"write queue full ({self._pending_items} items waiting)")
        stored, rejected, detail, first, last = await self._request(
            wire.TELEMETRY, (span_rows or None, log_rows or None), items
        )
        if detail:
            message = "; ".join(filter(None, (message, detail)))
        return AppendOutcome(
            stored=stored, rejected=rejected + len(bad), message=message, received_from=first, received_to=last
        )

    async def load_traces(
        self, trace_ids: Sequence[str], *, received: tuple[float, float] | None = None
    ) -> dict[str, TraceData]:
        found = await self.read(ops.load_traces, list(trace_ids), received)
        return {
            tid: TraceData(spans=tuple(rows.span_from_row(r) for r in s), logs=tuple(rows.log_from_row(r) for r in lg))
            for tid, (s, lg) in found.items()
        }

    async def pending_traces(self, *, limit: int) -> list[tuple[str, float, float, bool]]:
        marker = await self.read(ops.read_marker, _WATERMARK)
        since = dt.datetime.fromtimestamp(0, dt.UTC)
        if marker:
            since = dt.datetime.fromisoformat(marker) - RECOVERY_MARGIN
        return await self.read(ops.pending_traces, since, limit)

    async def assembled_before(self, trace_ids: Sequence[str]) -> set[str]:
        return set(await self.read(ops.assembled_before, list(trace_ids))) if trace_ids else set()

    async def set_assembled_through(self, when: dt.datetime) -> None:
        await self.write(ops.write_marker, _WATERMARK, when.isoformat())

    async def record_assembly(self, records: Sequence[AssemblyRecord], *, new_traces: Collection[str] = ()) -> None:
        new = set(new_traces)
        await self.write(
            ops.record_assembly, [_assembly_values(r) for r in records], [r.trace_id in new for r in records]
        )

    async def prune_span_log(self, older_than: dt.datetime) -> dict[str, int]:
        deleted: dict[str, int] = {}
        for catalog in layout.SPAN_LOGS:  # the spans first: a trace is never taken for unassembled
            for table, n in (await self.write(ops.prune_spans, catalog, older_than)).items():
                deleted[table] = deleted.get(table, 0) + n
        return {**deleted, **await self.write(ops.prune_assembled, older_than)}

    # --- ResultStore ------------------------------------------------------------------------------

    async def upsert_runs(
        self, runs: Sequence[AgentRun], *, replace_traces: Sequence[str] = (), new_traces: Collection[str] = ()
    ) -> None:
        new = set(new_traces)
        self._new_traces.assembled(new, [*replace_traces, *(r.trace_id for r in runs if r.trace_id not in new)])
        await self.write(
            ops.upsert_runs, [run_to_row(r) for r in runs], list(replace_traces), [r.trace_id in new for r in runs]
        )

    async def load_runs(self, run_ids: Sequence[str]) -> list[AgentRun]:
        return [run_from_row(r) for r in await self.read(ops.load_runs, list(run_ids))]

    async def load_conversation(self, conversation_id: str) -> Conversation | None:
        found = await self.read(ops.load_conversation, conversation_id)
        runs = tuple(run_from_row(r) for r in found)
        return Conversation(conversation_id=conversation_id, runs=runs) if runs else None

    async def target_ids(self, scope: str, *, since: dt.datetime | None, until: dt.datetime | None) -> list[str]:
        return await self.read(ops.target_ids, scope, since, until)

    async def write_scores(self, scores: Sequence[ScoreRecord], decisions: Sequence[DecisionRecord]) -> None:
        fresh = self._new_traces
        await self.write(
            ops.write_scores,
            [score_values(s) for s in scores],
            [decision_values(d) for d in decisions],
            [fresh.score(s) for s in scores],
            [fresh.decision(d) for d in decisions],
        )

    async def spent_today_usd(self) -> float:
        return await self.read(ops.spent_today)

    async def prune_results(self, older_than: dt.datetime | None) -> ResultsPruned:
        marker = await self.read(ops.read_marker, _WATERMARK)
        # traces recovery may still look at keep their assembly records (else they would be assembled again)
        keep_after = (
            dt.datetime.fromisoformat(marker) - RECOVERY_MARGIN if marker else dt.datetime.fromtimestamp(0, dt.UTC)
        )
        plan = await self.read(keys.plan_prune, older_than, self.max_index_keys, keep_after, self.prune_slice_keys)
        deleted: dict[str, int] = {}
        for before in plan["steps"]:  # a transaction each: the stage writer's other writes run between them
            for table, count in (await self.write(keys.delete_before, before, keep_after)).items():
                deleted[table] = deleted.get(table, 0) + count
        cutoff = plan["budget_cutoff"]
        return ResultsPruned(
            deleted=deleted,
            keys=plan["keys"],
            max_keys=self.max_index_keys,
            index_bytes=await self.read(keys.index_bytes),
            transactions=len(plan["steps"]),
            budget_cutoff=None if cutoff is None else dt.datetime.fromtimestamp(cutoff, dt.UTC),
        )

    async def unscored_recent(
        self, run_scorer_ids: Sequence[str], *, window_s: float, conversation_scorer_ids: Sequence[str] = ()
    ) -> PendingRecovery:
        runs, conversations = await self.read(
            ops.unscored_recent, list(run_scorer_ids), list(conversation_scorer_ids), window_s
        )
        decided = {("run", r[0]): frozenset(d) for r, d in runs}
        decided.update({("conversation", c): frozenset(d) for c, d in conversations})
        return PendingRecovery(
            runs=[run_from_row(r) for r, _ in runs], conversation_ids=[c for c, _ in conversations], decided=decided
        )

    # --- export deliveries (tracescorer.store.deliveries) ------------------------------------------

    async def due_deliveries(self, sink: str, owner: str, limit: int, ignore_backoff: bool = False) -> list[DueScore]:
        due, self._settled[sink] = await self.read(
            deliveries.read_due, sink, owner, limit, ignore_backoff, self._settled.get(sink)
        )
        return due

    async def claim_deliveries(self, sink: str, owner: str, lease_s: float, claims: Sequence[Claim]) -> dict[str, int]:
        return await self.write(deliveries.claim, sink, owner, lease_s, list(claims))

    async def record_deliveries(
        self, sink: str, owner: str, outcomes: Sequence[DeliveryOutcome], all_sinks: Sequence[str]
    ) -> int:
        return await self.write(deliveries.record, sink, owner, list(outcomes), list(all_sinks))

    async def next_delivery_due_in(self, sink: str) -> float | None:
        return await self.read(deliveries.next_due_in, sink)

    async def delivery_states(self, sink: str | None = None) -> list[dict[str, Any]]:
        return await self.read(deliveries.states, sink)

    # --- built-in monitors (tracescorer.store.monitors) ------------------------------------------

    async def monitor_states(self, monitor_ids: Sequence[str]) -> list[MonitorState]:
        return await self.read(monitors.load_states, list(monitor_ids))

    async def save_monitors(self, states: Sequence[MonitorState], events: Sequence[MonitorEvent]) -> None:
        await self.write(monitors.save, list(states), list(events))

    async def prune_monitor_events(self, now: float) -> int:
        return await self.write(monitors.prune_events, now)

    async def rebuild_monitor_windows(self, specs: Sequence[WindowSpec], max_examples: int) -> Rebuilt:
        return await self.read(monitors.rebuild, list(specs), max_examples)

    async def query(self, sql: str, *, max_rows: int, timeout_s: float, params: Sequence[Any] = ()) -> QueryResult:
        result: QueryResult = await self._request(wire.QUERY, (sql, max_rows, timeout_s, list(params)))
        return result


def _assembly_values(record: AssemblyRecord) -> tuple[Any, ...]:
    return (
        record.trace_id,
        record.reason,
        record.incomplete,
        record.span_count,
        record.log_count,
        record.run_count,
        record.unmatched_reason,
        record.service_name,
        record.root_name,
        record.last_received_at,
    )


# --- read-only access (CLI without a running daemon) -----------------------------------------------


def check_read_only(con: Any, sql: str) -> None:
    """Raise :class:`ReadOnlyViolation` unless ``sql`` is one SELECT over the database's own
    tables (the guard of :mod:`tracescorer.store.readonly`)."""
    from tracescorer.store import readonly

    try:
        readonly.check_statement(con, sql)
    except readonly.QueryRefused as exc:
        raise ReadOnlyViolation(str(exc)) from None
    except readonly.QueryError as exc:
        raise StoreError(str(exc)) from None


def run_read_query(con: Any, sql: str, *, max_rows: int, timeout_s: float) -> QueryResult:
    """Validate and run a read statement (:func:`tracescorer.store.readonly.run_guarded`)."""
    from tracescorer.store import readonly

    try:
        return readonly.run_guarded(con, sql, max_rows=max_rows, timeout_s=timeout_s)
    except readonly.QueryRefused as exc:
        raise ReadOnlyViolation(str(exc)) from None
    except readonly.QueryError as exc:
        raise StoreError(str(exc)) from None


def open_read_only(path: str | Path) -> Any:
    """Open a database file read-only with the query lockdown (fails while a daemon holds it)."""
    from tracescorer.store import readonly

    try:
        return readonly.connect(path)
    except readonly.QueryError as exc:
        raise StoreError(str(exc)) from None


__all__ = [
    "AppendOutcome",
    "CommitObserver",
    "DataError",
    "DuckDBStore",
    "QueryResult",
    "QueueFull",
    "ReadOnlyViolation",
    "StoreClosed",
    "StoreError",
    "check_read_only",
    "open_read_only",
    "run_read_query",
]
