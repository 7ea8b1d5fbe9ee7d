"""The assembly stage of the daemon: logged spans -> complete traces -> agent runs in the store.

Fed by the segment log's feed (:class:`~tracescorer.feed.stage.TelemetryListener`),
it tracks traces in a :class:`TraceBuffer`; on a timer it extracts the runs of every complete
trace, upserts them and records the trace as assembled, then hands the runs to
:class:`RunListener`s (scoring). Traces whose items are not in memory — spilled out of the
buffer's window, late items of an already assembled trace — are read back from the segment-log
records of their items (:class:`~tracescorer.assembly.sources.TraceSource`).

There is no recovery of its own: the feed keeps the segment log from the oldest record a trace not
assembled yet needs (:meth:`AssemblyStage.oldest_offset`) and replays from there at the next
start; a replayed trace already assembled from the same records is told apart by its assembly
record (:meth:`~tracescorer.assembly.sources.TraceSource.recall`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from tracescorer.aio import cancel
from tracescorer.assembly.buffer import AssembledTrace, TraceBuffer, is_root
from tracescorer.assembly.sources import TraceSource
from tracescorer.config import AssemblySettings
from tracescorer.conventions import Extraction, extract_runs
from tracescorer.metrics import Metrics
from tracescorer.model import AgentRun, LogRecord, Span
from tracescorer.records.scores import AssemblyRecord
from tracescorer.store.api import RunStore, SpanLog, StoreError, write_narrowing

log = logging.getLogger(__name__)

CHUNK = 200  # traces per extraction pass, their runs written together (a write has a fixed cost)
SLICE = 25  # traces extracted in one turn of the event loop (~4 ms): receivers answer in between
IN_FLIGHT = 4  # chunks whose runs are being written while the next ones are extracted
RETRY_MAX_S = 5.0  # the longest wait before runs the store refused are tried again (doubling from a tick)


class RunListener(Protocol):
    """Told about runs after they were stored (on the event loop; must not block)."""

    def on_runs(self, runs: Sequence[AgentRun]) -> None: ...


@dataclass(frozen=True, slots=True)
class _Result:
    trace: AssembledTrace
    spans: Sequence[Span]
    logs: Sequence[LogRecord]
    runs: list[AgentRun]
    unmatched_reason: str | None

    def record(self) -> AssemblyRecord:
        root = next((s for s in self.spans if is_root(s)), None)
        return AssemblyRecord(
            trace_id=self.trace.trace_id,
            reason=self.trace.reason,
            incomplete=self.trace.incomplete,
            span_count=len(self.spans),
            log_count=len(self.logs),
            run_count=len(self.runs),
            unmatched_reason=self.unmatched_reason,
            service_name=self.spans[0].service_name if self.spans else None,
            root_name=root.name if root else None,
            last_received_at=self.trace.received[1] or None,
            log_offsets=self.trace.offsets or None,
        )


def _dedupe(spans: Sequence[Span]) -> list[Span]:
    # a client retry after a lost acknowledgement stores a span twice; one copy is enough
    seen: dict[str, Span] = {}
    for s in spans:
        seen[s.span_id] = s
    return list(seen.values())


class AssemblyStage:
    """Owns the :class:`TraceBuffer`; runs on the daemon's event loop."""

    def __init__(
        self,
        settings: AssemblySettings,
        span_log: SpanLog,
        runs: RunStore,
        metrics: Metrics,
        source: TraceSource,
        *,
        conversations: RunListener | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._clock = clock  # monotonic seconds: idle, max_wait, the lag and the write retry's wait
        self.conversations = conversations  # conversation idling, told first; started and stopped on its own
        self._span_log = span_log
        self._source = source
        self._runs = runs
        self._metrics = metrics
        self.buffer = TraceBuffer(
            idle_s=settings.idle_s,
            max_wait_s=settings.max_wait_s,
            max_traces=settings.max_traces,
            max_spans=settings.max_spans,
            clock=clock,
        )
        self._listeners: list[RunListener] = []
        self._task: asyncio.Task[None] | None = None
        self._tick_s = min(0.25, settings.idle_s / 4)  # a complete trace waits up to a tick for its pass
        self._lock = asyncio.Lock()
        self._writes: dict[asyncio.Task[None], list[AssembledTrace]] = {}
        self._taken: list[AssembledTrace] = []  # the chunk being read back and extracted
        self._store_away = False  # the last pass could not read from the store (warned once until it answers)
        self.lag_s = 0.0  # how long after becoming ready the latest chunk was taken
        self._write_failing: str | None = None  # why writing runs fails, while it does (logged once)
        self._retry_s = 0.0
        self._retry_at = 0.0  # no pass before it: the last write failed (e.g. a full disk)

    def add_listener(self, listener: RunListener) -> None:
        self._listeners.append(listener)

    # TelemetryListener
    def on_committed(
        self,
        spans: Sequence[Span],
        logs: Sequence[LogRecord],
        received: tuple[float, float],
        replayed: bool = False,
        span_offsets: Sequence[int] | None = None,
        log_offsets: Sequence[int] | None = None,
    ) -> None:
        if spans:
            self.buffer.add_spans(spans, received=received, replayed=replayed, offsets=span_offsets)
        if logs:
            self.buffer.add_logs(logs, received=received, replayed=replayed, offsets=log_offsets)
        self._metrics.buffered_traces.set(len(self.buffer))

    def on_replayed(self) -> None:
        """The feed handed on everything acknowledged before this start: replayed traces still
        without a root are complete once idle."""
        self.buffer.replaying = False

    def backlog(self) -> str | None:
        """Backlog check for the segment log's feed: None while the buffer has room for more
        traces and assembly keeps up (takes traces within ``assembly.max_lag_s`` of their becoming
        ready)."""
        if self.buffer.full:
            return f"{len(self.buffer)} traces waiting for assembly (assembly.max_traces)"
        if self.lag_s > self._settings.max_lag_s:
            return f"assembly is {self.lag_s:.1f}s behind (assembly.max_lag_s)"
        return None

    def oldest_offset(self) -> int | None:
        """The first segment-log record a trace not assembled yet needs (None: none is): tracked,
        being extracted, or its runs being written."""
        found = [self.buffer.oldest_offset()]
        found += [min(t.offsets) for t in self._taken if t.offsets]
        found += [min(t.offsets) for chunk in self._writes.values() for t in chunk if t.offsets]
        return min((o for o in found if o is not None), default=None)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="assembly")

    async def stop(self, deadline: float) -> bool:
        """Stop the timer and let runs already being written finish (until ``deadline``,
        monotonic seconds). Traces still tracked are not assembled now: the feed kept their
        segment-log records, and the next start replays them."""
        await cancel([self._task])
        if self._writes:
            _, left = await asyncio.wait(list(self._writes), timeout=max(0.1, deadline - time.monotonic()))
            return not left
        return True

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._tick_s)
            if self._clock() < self._retry_at:
                continue  # the store refused the last runs: traces wait in the buffer (and the log)
            try:
                await self.flush()
            except Exception:  # a bad batch must not stop assembly for good
                log.exception("assembly pass failed")

    async def flush(self, traces: list[AssembledTrace] | None = None) -> int:
        """Assemble every complete trace now (or the given ones) and wait until their runs are
        stored; returns how many."""
        done = 0
        async with self._lock:
            while True:
                if traces is None:
                    chunk = self._after_writes(self.buffer.pop_complete(limit=CHUNK))
                else:
                    chunk = traces[done : done + CHUNK]
                if not chunk:
                    if traces is None:
                        self.lag_s = 0.0
                    break
                if traces is None:
                    self.lag_s = max(0.0, self._clock() - min(t.due for t in chunk))
                self._taken = chunk
                try:
                    assembled = await self._assemble(chunk)
                finally:
                    self._taken = []
                if not assembled:
                    break  # the store is away: this pass ends, the next tick tries again
                done += len(chunk)
                self._metrics.buffered_traces.set(len(self.buffer))
                await asyncio.sleep(0)  # let receivers answer between chunks
            if self._writes:
                await asyncio.wait(list(self._writes))
        return done

    async def _assemble(self, traces: list[AssembledTrace]) -> bool:
        """Extract a chunk and start writing its runs; the next chunk is extracted while they are
        written (at most ``IN_FLIGHT`` chunks in flight), listeners hear of runs once stored.
        False when the store could not be read (the chunk is tracked again, to be retried)."""
        try:
            traces = await self._source.recall(traces)
            stored = await self._source.load([t for t in traces if t.from_store])
        except StoreError as exc:
            # e.g. the store process is being restarted: tracked again, retried at the next pass
            (log.debug if self._store_away else log.warning)(
                "reading %d trace(s) back from the store failed (%s); retrying each pass until it answers",
                len(traces),
                exc,
            )
            self._store_away = True
            self._track_again(traces)
            return False
        self._store_away = False
        results = []
        for at in range(0, len(traces), SLICE):
            if at:
                await asyncio.sleep(0)  # let receivers answer: acknowledgements wait behind every slice
            started = time.thread_time()
            for trace in traces[at : at + SLICE]:
                spans, logs = stored.get(trace.trace_id, (trace.spans, trace.logs))
                if not spans and not logs:
                    continue  # nothing stored (retention removed it), or nothing new since its assembly
                results.append(self._extract(trace, _dedupe(spans), logs))
            self._metrics.child(self._metrics.stage_cpu, "assembly").inc(time.thread_time() - started)
        if not results:
            return True
        task = asyncio.create_task(self._persist(results), name="assembly-write")
        self._writes[task] = traces
        task.add_done_callback(self._written)
        if len(self._writes) >= IN_FLIGHT:
            await asyncio.wait(list(self._writes), return_when=asyncio.FIRST_COMPLETED)
        return True

    async def _persist(self, results: list[_Result]) -> None:
        # a trace the store refuses as data is recorded without runs; the rest are stored
        results = await write_narrowing(results, self._write_runs, self._refused)
        runs = [r for res in results for r in res.runs]
        if self.conversations is not None:
            self.conversations.on_runs(runs)
        for listener in self._listeners:
            try:
                listener.on_runs(runs)
            except Exception:  # scoring problems must not stop assembly
                log.exception("run listener %r failed", listener)

    async def _write_runs(self, results: list[_Result], retry: bool) -> None:
        latest: dict[str, AgentRun] = {}
        for res in results:
            for run in res.runs:
                latest[run.run_id] = run
        # never assembled before (as far as this process knows): the store need not look for their
        # rows; not on a retry, whose refused attempt may have stored their assembly records
        new = [] if retry else [r.trace.trace_id for r in results if not r.trace.late]
        # sent together: the store commits both in one group, in order
        await asyncio.gather(
            self._runs.upsert_runs(
                list(latest.values()),
                replace_traces=[r.trace.trace_id for r in results if r.trace.from_store],
                new_traces=new,
            ),
            self._span_log.record_assembly([r.record() for r in results], new_traces=new),
        )

    async def _refused(self, result: _Result, exc: Exception) -> None:
        """Record a trace whose runs the store refused as assembled without them, saying why: loud,
        counted, and not retried."""
        reason = f"runs not stored: {exc}"
        log.warning(
            "the store refused the runs of trace %s (%s): recorded as assembled without runs "
            "(assembled_traces.unmatched_reason)",
            result.trace.trace_id,
            exc,
        )
        self._metrics.traces_refused.inc()
        await self._span_log.record_assembly(
            [replace(result, runs=[], unmatched_reason=reason).record()], new_traces=[]
        )

    def _written(self, task: asyncio.Task[None]) -> None:
        traces = self._writes.pop(task, [])
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            if self._write_failing is not None:
                log.info("storing runs works again (it failed: %s)", self._write_failing)
            self._write_failing, self._retry_s = None, 0.0
            return
        if str(exc) != self._write_failing:
            log.warning(
                "storing the runs of %d trace(s) failed (%s); retrying, waiting up to %.0fs between tries "
                "(not logged again until it works or fails otherwise)",
                len(traces),
                exc,
                RETRY_MAX_S,
            )
        self._write_failing = str(exc)
        self._retry_s = min(RETRY_MAX_S, max(self._tick_s, self._retry_s * 2))
        self._retry_at = self._clock() + self._retry_s
        self._track_again(traces)

    def _after_writes(self, chunk: list[AssembledTrace]) -> list[AssembledTrace]:
        """``chunk`` less the traces whose runs are being written now (items of a trace came again:
        late, or the feed and recovery both had it after a restart): tracked again, they are read
        back and compared once that write is stored, not assembled twice beside it."""
        writing = {t.trace_id for written in self._writes.values() for t in written}
        if not writing:
            return chunk
        later = [t for t in chunk if t.trace_id in writing]
        if later:
            self._track_again(later)
            return [t for t in chunk if t.trace_id not in writing]
        return chunk

    def _track_again(self, traces: Sequence[AssembledTrace]) -> None:
        """Not stored: track them again, to be read back and retried."""
        self.buffer.add_pending(
            [(t.trace_id, t.received[0], t.received[1], True) for t in traces],
            offsets={t.trace_id: t.offsets for t in traces},
        )

    def _extract(self, trace: AssembledTrace, spans: list[Span], logs: Sequence[LogRecord]) -> _Result:
        started = time.perf_counter()
        incomplete = trace.incomplete and not any(is_root(s) for s in spans)
        try:
            extraction = extract_runs(
                spans,
                logs,
                conversation_keys=self._settings.conversation_keys,
                incomplete=incomplete or trace.reason == "overflow",
            )
        except Exception as exc:  # a bug met on one trace must not drop its chunk
            log.exception("extracting the runs of trace %s failed: recorded as unmatched", trace.trace_id)
            extraction = Extraction(unmatched_reason=f"extraction failed: {type(exc).__name__}: {exc}")
        m = self._metrics
        m.assembly_seconds.observe(time.perf_counter() - started)
        m.child(m.traces_assembled, trace.reason, "late" if trace.late else "first").inc()
        for run in extraction.runs:
            m.child(m.runs_extracted, run.convention).inc()
        reason = extraction.unmatched_reason if not extraction.runs else None
        if reason is not None:
            m.traces_unmatched.inc()
            log.debug("trace %s not reconstructable: %s", trace.trace_id, reason)
        return _Result(trace, spans, logs, extraction.runs, reason)
