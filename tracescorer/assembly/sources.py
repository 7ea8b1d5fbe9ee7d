"""Where assembly reads a trace back when its items are not in memory (:class:`TraceSource`).

A trace is read back when it was spilled out of the buffer's window, when late items came for a
trace assembled before (the whole trace is assembled again), and, after a restart, when a trace
taken for new may have been assembled before the stop.

:class:`SegmentLogSource` reads the segment-log records each trace's items came in. "Was this
trace already assembled from these items?" has one answer: its assembly record names those
records, so a trace the feed replays after a restart (from the oldest record a trace not assembled
yet needed) is assembled again only when it has records its assembly did not read.
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

    async def recall(self, traces: list[AssembledTrace]) -> list[AssembledTrace]:
        """The traces taken for new that were assembled before, made late (read whole); a trace
        already assembled from exactly these items is left out."""
        ...

    async def load(self, traces: Sequence[AssembledTrace]) -> Items:
        """The items of traces that must be read back (:attr:`AssembledTrace.from_store`); a trace
        with nothing to assemble (its records released, or nothing new since its assembly)
        has empty items."""
        ...


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
    """Traces read back from the segment-log records of their items."""

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
                # assembled from these very records before the stop (a replay), or recorded
                # without its records (an older version's span rows): the stored runs stand
                log.debug("trace %s was assembled before from these records: not again", trace.trace_id)
        return out

    async def load(self, traces: Sequence[AssembledTrace]) -> Items:
        if not traces:
            return {}  # most passes: every trace in memory (no thread hop)
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
