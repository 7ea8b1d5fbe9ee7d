"""Where assembly reads a trace back when its items are not in memory (:class:`TraceSource`).

A trace is read back when it was spilled out of the buffer's window, when late items came for a
trace assembled before (the whole trace is assembled again), and, after a restart, when a trace
taken for new may have been assembled before the stop.

* :class:`SpanLogSource` (``store.spans: agent | all``): from the span log's rows; traces left
  unassembled by the last stop are found there at start. A trace the feed replays after a restart
  that was assembled before the stop is read back whole and assembled again only when the span
  log holds more items than its assembly did (no second run write, score or evaluation event).
* :class:`SegmentLogSource` (``store.spans: none``): from the segment-log records each trace's
  items came in. Assembly records name those records, so a trace read again after a restart (the
  feed replays from the oldest record a trace not assembled yet needed) is told apart from one
  with new items.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from tracescorer.assembly.traces import AssembledTrace
from tracescorer.metrics import Metrics
from tracescorer.model import LogRecord, Span
from tracescorer.store.api import SpanLog

log = logging.getLogger(__name__)

Items = dict[str, tuple[Sequence[Span], Sequence[LogRecord]]]


class TraceSource(Protocol):
    """Reads back traces whose items are not in memory."""

    #: reads traces by the log records of their items: the buffer tracks them, and the feed's
    #: replay (not the span log) brings back what the last stop left unassembled
    by_offsets: bool

    async def recall(self, traces: list[AssembledTrace]) -> list[AssembledTrace]:
        """The traces taken for new that were assembled before, made late (read whole); a trace
        already assembled from exactly these items is left out."""
        ...

    async def load(self, traces: Sequence[AssembledTrace]) -> Items:
        """The items of traces that must be read back (:attr:`AssembledTrace.from_store`); a trace
        with nothing to assemble (none stored, or no more than its :attr:`~AssembledTrace.before`)
        has empty items."""
        ...


class SpanLogSource:
    """Traces read back from the span log's rows."""

    by_offsets = False

    def __init__(self, span_log: SpanLog) -> None:
        self._span_log = span_log

    async def recall(self, traces: list[AssembledTrace]) -> list[AssembledTrace]:
        # without a root in memory the trace may have been assembled before a restart (its root
        # and the rest are in the span log, these are late items); one replayed after a restart may
        # have items stored before it (read it whole), and have been assembled before the stop from
        # these very items; late items may be a client's retry: read back whole, and compare
        doubtful = [t.trace_id for t in traces if t.incomplete or t.recovered or t.late]
        if not doubtful:
            return traces
        known = await self._span_log.assembled_before(doubtful)
        out = []
        for t in traces:
            if (b := known.get(t.trace_id)) is not None:
                out.append(replace(t, late=True, before=(b.span_count, b.log_count)))
            else:
                out.append(replace(t, late=True) if t.recovered else t)
        return out

    async def load(self, traces: Sequence[AssembledTrace]) -> Items:
        out: Items = {}
        late = [t for t in traces if t.late]
        spilled = [t for t in traces if t.spilled and not t.late]
        if late:
            found = await self._span_log.load_traces([t.trace_id for t in late])
            for trace in late:
                data = found.get(trace.trace_id)
                if data is None:
                    continue
                if trace.before == (len({s.span_id for s in data.spans}), len(data.logs)):
                    # the items its assembly held before the stop, no more (replayed from the
                    # segment log, or a client's retry): its stored runs and scores stand
                    log.debug("trace %s was assembled before from these items: not again", trace.trace_id)
                    out[trace.trace_id] = ((), ())
                else:
                    out[trace.trace_id] = (data.spans, data.logs)
        if spilled:
            bounds = (min(t.received[0] for t in spilled), max(t.received[1] for t in spilled))
            for tid, data in (await self._span_log.load_traces([t.trace_id for t in spilled], received=bounds)).items():
                out[tid] = (data.spans, data.logs)
        return out


class Found(Protocol):
    @property
    def spans(self) -> Mapping[str, Sequence[Span]]: ...
    @property
    def logs(self) -> Mapping[str, Sequence[LogRecord]]: ...
    @property
    def missing(self) -> set[str]: ...


class RecordReader(Protocol):
    """Reads traces' items out of segment-log records (:class:`tracescorer.feed.readback.LogTraces`)."""

    async def load(self, wanted: Mapping[str, Sequence[int]]) -> Found: ...


class SegmentLogSource:
    """Traces read back from the segment-log records of their items (``store.spans: none``)."""

    by_offsets = True

    def __init__(self, span_log: SpanLog, reader: RecordReader, metrics: Metrics) -> None:
        self._span_log = span_log
        self._reader = reader
        self._metrics = metrics

    async def recall(self, traces: list[AssembledTrace]) -> list[AssembledTrace]:
        # replayed after a restart, or without a root: ask whether (and from which records) the
        # trace was assembled before
        doubtful = [t.trace_id for t in traces if not t.late and (t.recovered or t.incomplete)]
        if not doubtful:
            return traces
        known = await self._span_log.assembled_before(doubtful)
        out = []
        for trace in traces:
            record = known.get(trace.trace_id)
            before = record.offsets if record is not None else None
            if before is None or trace.late:
                out.append(trace)
            elif before and not set(trace.offsets) <= set(before):
                out.append(replace(trace, late=True, offsets=tuple(sorted({*before, *trace.offsets}))))
            else:
                # assembled from these very records before the stop (a replay), or assembled
                # from span rows (a change of store.spans): the stored runs stand
                log.debug("trace %s was assembled before from these records: not again", trace.trace_id)
        return out

    async def load(self, traces: Sequence[AssembledTrace]) -> Items:
        found = await self._reader.load({t.trace_id: t.offsets for t in traces})
        out: Items = {}
        for trace in traces:
            tid = trace.trace_id
            if tid in found.missing:
                outcome = "kept" if trace.late else "partial"
                self._metrics.child(self._metrics.traces_unreadable, outcome).inc()
                log.warning(
                    "trace %s: a segment-log record of its items was released before it was read back; %s",
                    tid,
                    "its late items are dropped, its runs stay as assembled"
                    if trace.late
                    else "it is assembled from what is left",
                )
                if trace.late:
                    out[tid] = ((), ())  # a part of the trace would replace its whole runs
                    continue
            out[tid] = (found.spans.get(tid, ()), found.logs.get(tid, ()))
        return out
