"""The assembly stage of the daemon: committed spans -> complete traces -> agent runs in DuckDB.

Fed by the receiver after each commit (:class:`~tracescorer.receiver.ingest.TelemetryListener`),
it buffers spans per trace (:class:`TraceBuffer`), and on a timer extracts the runs of every
complete trace, upserts them into ``runs`` and records the trace in ``assembled_traces``. Traces
that received spans after assembly, and traces the span log holds but that were never assembled
(the daemon stopped first), are rebuilt from the span log. Runs are then handed to
:class:`RunListener`s (scoring).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from tracescorer.assembly.buffer import AssembledTrace, TraceBuffer, is_root
from tracescorer.config import AssemblySettings
from tracescorer.conventions import extract_runs
from tracescorer.metrics import Metrics
from tracescorer.model import AgentRun, LogRecord, Span
from tracescorer.store import rows
from tracescorer.store.duckdb import Connection, DuckDBStore
from tracescorer.store.runs import upsert_runs
from tracescorer.store.upsert import upsert

log = logging.getLogger(__name__)

RECOVERY_CHUNK = 200
FLUSH_CHUNK = 100

_PENDING_SQL = """
WITH latest AS (
  SELECT trace_id, max(received_at) AS last_received FROM spans GROUP BY trace_id
  UNION ALL
  SELECT trace_id, max(received_at) FROM log_records WHERE trace_id IS NOT NULL GROUP BY trace_id
), per AS (SELECT trace_id, max(last_received) AS last_received FROM latest GROUP BY trace_id)
SELECT per.trace_id FROM per LEFT JOIN assembled_traces a USING (trace_id)
WHERE a.trace_id IS NULL OR per.last_received > a.assembled_at
ORDER BY per.last_received
"""


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


def load_traces(con: Connection, trace_ids: Sequence[str]) -> dict[str, tuple[list[Span], list[LogRecord]]]:
    """Every stored span and log record of the given traces."""
    out: dict[str, tuple[list[Span], list[LogRecord]]] = {t: ([], []) for t in trace_ids}
    if not trace_ids:
        return out
    for row in con.execute(rows.SPAN_SELECT + " WHERE trace_id IN (SELECT unnest($1::VARCHAR[]))", [list(trace_ids)]).fetchall():
        out[row[0]][0].append(rows.span_from_row(row))
    for row in con.execute(rows.LOG_SELECT + " WHERE trace_id IN (SELECT unnest($1::VARCHAR[]))", [list(trace_ids)]).fetchall():
        out[row[7]][1].append(rows.log_from_row(row))
    return out


def _dedupe(spans: Sequence[Span]) -> list[Span]:
    # a client retry after a lost acknowledgement stores a span twice; one copy is enough
    seen: dict[str, Span] = {}
    for s in spans:
        seen[s.span_id] = s
    return list(seen.values())


_ASSEMBLED = ["trace_id", "reason", "incomplete", "span_count", "log_count", "run_count", "unmatched_reason",
              "service_name", "root_name"]


def _store_job(results: list[_Result]) -> Callable[[Connection], None]:
    def run(con: Connection) -> None:
        latest: dict[str, AgentRun] = {}
        for res in results:
            for run_ in res.runs:
                latest[run_.run_id] = run_
        upsert_runs(con, list(latest.values()))
        # a re-assembly may find a different agent span (e.g. the root arrived late): drop stale runs
        con.execute(
            "DELETE FROM runs WHERE list_contains($1::VARCHAR[], trace_id) AND NOT list_contains($2::VARCHAR[], run_id)",
            [[res.trace.trace_id for res in results], list(latest)],
        )
        rows = []
        for res in results:
            root = next((s for s in res.spans if is_root(s)), None)
            rows.append([res.trace.trace_id, res.trace.reason, res.trace.incomplete, len(res.spans), len(res.logs),
                         len(res.runs), res.unmatched_reason, res.spans[0].service_name if res.spans else None,
                         root.name if root else None])
        upsert(con, "assembled_traces", _ASSEMBLED, "trace_id", rows, insert_extra={"assembled_at": "now()"},
               update_extra=", assembled_at = now()")

    return run


class AssemblyStage:
    """Owns the :class:`TraceBuffer`; runs on the daemon's event loop."""

    def __init__(self, settings: AssemblySettings, store: DuckDBStore, metrics: Metrics) -> None:
        self._settings = settings
        self._store = store
        self._metrics = metrics
        self.buffer = TraceBuffer(
            idle_s=settings.idle_s,
            max_wait_s=settings.max_wait_s,
            max_traces=settings.max_traces,
            max_spans=settings.max_spans,
        )
        self._listeners: list[RunListener] = []
        self._task: asyncio.Task[None] | None = None
        self._recovery: asyncio.Task[None] | None = None
        self._tick_s = min(0.5, settings.idle_s / 2)

    def add_listener(self, listener: RunListener) -> None:
        self._listeners.append(listener)

    # TelemetryListener
    def on_committed(self, spans: Sequence[Span], logs: Sequence[LogRecord]) -> None:
        if spans:
            self.buffer.add_spans(spans)
        if logs:
            self.buffer.add_logs(logs)
        self._metrics.buffered_traces.set(len(self.buffer))

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="assembly")
        self._recovery = asyncio.create_task(self._recover(), name="assembly-recovery")

    async def stop(self) -> None:
        """Stop the timer. Traces still buffered are not assembled now: their spans are in the
        span log, and the next start picks them up (they have no ``assembled_traces`` row)."""
        for task in (self._recovery, self._task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._tick_s)
            try:
                await self.flush()
            except Exception:  # noqa: BLE001 - a bad batch must not stop assembly for good
                log.exception("assembly pass failed")

    async def flush(self, traces: list[AssembledTrace] | None = None) -> int:
        """Assemble every complete trace now (or the given ones); returns how many."""
        traces = self.buffer.pop_complete() if traces is None else traces
        self._metrics.buffered_traces.set(len(self.buffer))
        # extraction is CPU work on the event loop: in chunks, so receivers keep answering between them
        for start in range(0, len(traces), FLUSH_CHUNK):
            await self._assemble(traces[start : start + FLUSH_CHUNK])
        return len(traces)

    async def _assemble(self, traces: list[AssembledTrace]) -> None:
        late_ids = [t.trace_id for t in traces if t.late]
        stored = await asyncio.to_thread(self._store.read, lambda con: load_traces(con, late_ids)) if late_ids else {}
        results = []
        for trace in traces:
            spans, logs = stored.get(trace.trace_id, (trace.spans, trace.logs))
            results.append(self._extract(trace, _dedupe(spans), logs))
        await asyncio.wrap_future(self._store.submit(_store_job(results), items=len(results)))
        runs = [r for res in results for r in res.runs]
        for listener in self._listeners:
            try:
                listener.on_runs(runs)
            except Exception:  # noqa: BLE001 - scoring problems must not stop assembly
                log.exception("run listener %r failed", listener)

    def _extract(self, trace: AssembledTrace, spans: list[Span], logs: Sequence[LogRecord]) -> _Result:
        started = time.perf_counter()
        incomplete = trace.incomplete and not any(is_root(s) for s in spans)
        extraction = extract_runs(
            spans, logs, conversation_keys=self._settings.conversation_keys, incomplete=incomplete or trace.reason == "overflow"
        )
        m = self._metrics
        m.assembly_seconds.observe(time.perf_counter() - started)
        m.traces_assembled.labels(trace.reason, "late" if trace.late else "first").inc()
        for run in extraction.runs:
            m.runs_extracted.labels(run.convention).inc()
        reason = extraction.unmatched_reason if not extraction.runs else None
        if reason is not None:
            m.traces_unmatched.inc()
            log.debug("trace %s not reconstructable: %s", trace.trace_id, reason)
        return _Result(trace, spans, logs, extraction.runs, reason)

    async def _recover(self) -> None:
        """Assemble traces the span log holds that were never (fully) assembled."""
        try:
            pending = await asyncio.to_thread(self._store.read, lambda con: [r[0] for r in con.execute(_PENDING_SQL).fetchall()])
        except Exception:  # noqa: BLE001 - recovery is best effort; live traffic goes on
            log.exception("could not list unassembled traces")
            return
        if pending:
            log.info("recovering %d trace(s) not assembled before the last stop", len(pending))
        for i in range(0, len(pending), RECOVERY_CHUNK):
            chunk = pending[i : i + RECOVERY_CHUNK]
            stored = await asyncio.to_thread(self._store.read, lambda con, c=chunk: load_traces(con, c))
            traces = [
                AssembledTrace(
                    trace_id=tid,
                    spans=tuple(spans),
                    logs=tuple(logs),
                    incomplete=not any(is_root(s) for s in spans),
                    reason="recovered",
                )
                for tid, (spans, logs) in stored.items()
                if spans or logs
            ]
            await self.flush(traces)
            self._metrics.traces_recovered.inc(len(traces))
