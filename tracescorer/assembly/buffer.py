"""Group spans (and GenAI log records) per trace until the trace is complete.

A trace is *complete* when its root span has arrived (OTLP only exports ended spans) and nothing
arrived for it for ``idle_s``; it is *timed out* when ``max_wait_s`` passed since its first span,
root or not. A root is a span without a parent span id, or one whose parent lives in another
process (OTLP span flags say "parent is remote") — a service that is only one hop of a
distributed trace never sees a parentless span.

Memory is bounded by ``max_traces`` and ``max_spans`` (spans plus log records held). On overflow
the oldest traces are handed out with what they have, marked incomplete, never dropped; every
such event is counted in :attr:`TraceBuffer.stats`.

Spans (or log records) arriving for a trace that was already handed out start a new entry; when
that entry completes it comes back with ``late=True`` and the caller re-extracts the trace from
the span log and upserts its runs (run ids are deterministic, so this replaces, not adds).

Not thread-safe: one asyncio loop (or one thread) owns a buffer. Time comes from the injected
``clock`` (monotonic seconds) so tests can drive it.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tracescorer.model import LogRecord, Span

# OTLP SpanFlags: bit 8 says whether bit 9 ("parent is remote") is known.
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200

COMPLETE, MAX_WAIT, OVERFLOW, SHUTDOWN = "complete", "max_wait", "overflow", "shutdown"


@dataclass(frozen=True, slots=True, kw_only=True)
class AssembledTrace:
    """A trace handed to extraction.

    ``reason``: ``complete`` (root ended, then quiet for ``idle_s``), ``max_wait``, ``overflow``
    or ``shutdown``. ``incomplete`` is True on overflow and when no root span was seen (a late
    entry is judged by the caller on the whole stored trace). ``late`` is True when
    the trace had already been handed out before: these spans are only the late ones, the
    caller should re-read the whole trace from the span log.
    """

    trace_id: str
    spans: tuple[Span, ...]
    logs: tuple[LogRecord, ...]
    incomplete: bool
    reason: str
    late: bool = False


@dataclass(slots=True)
class BufferStats:
    """Counters for metrics (monotonic except the two ``*_buffered`` gauges)."""

    spans_added: int = 0
    duplicate_spans: int = 0
    logs_added: int = 0
    logs_without_trace: int = 0
    traces_complete: int = 0
    traces_max_wait: int = 0
    traces_overflow: int = 0
    traces_shutdown: int = 0
    traces_late: int = 0
    traces_buffered: int = 0
    items_buffered: int = 0


@dataclass(slots=True)
class _Entry:
    first_seen: float
    last_seen: float
    spans: dict[str, Span] = field(default_factory=dict)
    logs: list[LogRecord] = field(default_factory=list)
    has_root: bool = False
    late: bool = False

    @property
    def size(self) -> int:
        return len(self.spans) + len(self.logs)


def is_root(span: Span) -> bool:
    """No parent, or a parent in another process (OTLP ``SPAN_FLAGS_CONTEXT_IS_REMOTE``)."""
    if not span.parent_span_id:
        return True
    return bool(span.flags & _HAS_IS_REMOTE) and bool(span.flags & _IS_REMOTE)


class TraceBuffer:
    """Per-trace buffer with idle / max-wait completion and bounded memory (see module doc)."""

    def __init__(
        self,
        *,
        idle_s: float = 5.0,
        max_wait_s: float = 300.0,
        max_traces: int = 10_000,
        max_spans: int = 500_000,
        clock: Callable[[], float] = time.monotonic,
        remember_assembled: int = 100_000,
    ) -> None:
        if idle_s < 0 or max_wait_s <= 0 or max_traces < 1 or max_spans < 1:
            raise ValueError("idle_s >= 0, max_wait_s > 0, max_traces >= 1, max_spans >= 1 required")
        self.idle_s = idle_s
        self.max_wait_s = max_wait_s
        self.max_traces = max_traces
        self.max_spans = max_spans
        self._clock = clock
        # Insertion order = first seen (for max_wait and overflow); activity order separately.
        self._entries: dict[str, _Entry] = {}
        self._activity: OrderedDict[str, None] = OrderedDict()
        self._ready: list[AssembledTrace] = []
        self._items = 0
        self._assembled: OrderedDict[str, None] = OrderedDict()
        self._remember = remember_assembled
        self.stats = BufferStats()

    # --- intake -------------------------------------------------------------------------------

    def add_spans(self, spans: Iterable[Span], now: float | None = None) -> None:
        """Buffer spans of any traces, in any order; a span id seen twice is kept once."""
        t = self._clock() if now is None else now
        for span in spans:
            entry = self._entry(span.trace_id, t)
            old = entry.spans.get(span.span_id)
            if old is not None:
                self.stats.duplicate_spans += 1
                if span.end_time_unix_nano >= old.end_time_unix_nano:
                    entry.spans[span.span_id] = span
            else:
                entry.spans[span.span_id] = span
                self._items += 1
            entry.has_root = entry.has_root or is_root(span)
            self.stats.spans_added += 1
        self._enforce_bounds()

    def add_logs(self, records: Iterable[LogRecord], now: float | None = None) -> None:
        """Buffer log records that name a trace; records without a trace id are only counted."""
        t = self._clock() if now is None else now
        for rec in records:
            if not rec.trace_id:
                self.stats.logs_without_trace += 1
                continue
            self._entry(rec.trace_id, t).logs.append(rec)
            self._items += 1
            self.stats.logs_added += 1
        self._enforce_bounds()

    def _entry(self, trace_id: str, now: float) -> _Entry:
        entry = self._entries.get(trace_id)
        if entry is None:
            entry = _Entry(first_seen=now, last_seen=now, late=trace_id in self._assembled)
            self._entries[trace_id] = entry
        entry.last_seen = now
        self._activity[trace_id] = None
        self._activity.move_to_end(trace_id)
        return entry

    def _enforce_bounds(self) -> None:
        while self._entries and (len(self._entries) > self.max_traces or self._items > self.max_spans):
            oldest = next(iter(self._entries))
            self._ready.append(self._take(oldest, OVERFLOW))
        self._gauges()

    # --- output -------------------------------------------------------------------------------

    def pop_complete(self, now: float | None = None) -> list[AssembledTrace]:
        """Traces ready for extraction: overflowed ones, complete ones, timed-out ones."""
        t = self._clock() if now is None else now
        out, self._ready = self._ready, []
        done: list[tuple[str, str]] = []
        for trace_id in self._activity:  # least recently active first
            entry = self._entries[trace_id]
            if t - entry.last_seen < self.idle_s:
                break
            # Late-arriving pieces of an already assembled trace need no root to be complete.
            if entry.has_root or entry.late:
                done.append((trace_id, COMPLETE))
        done_ids = {d[0] for d in done}
        for trace_id, entry in self._entries.items():  # oldest first
            if t - entry.first_seen < self.max_wait_s:
                break
            if trace_id not in done_ids:
                done.append((trace_id, MAX_WAIT))
        out.extend(self._take(trace_id, reason) for trace_id, reason in done)
        self._gauges()
        return out

    def pop_all(self) -> list[AssembledTrace]:
        """Everything buffered (for shutdown), oldest first; complete ones are not incomplete."""
        out, self._ready = self._ready, []
        out.extend(self._take(tid, SHUTDOWN) for tid in list(self._entries))
        self._gauges()
        return out

    def __len__(self) -> int:
        return len(self._entries)

    def _take(self, trace_id: str, reason: str) -> AssembledTrace:
        entry = self._entries.pop(trace_id)
        self._activity.pop(trace_id, None)
        self._items -= entry.size
        counter = {COMPLETE: "traces_complete", MAX_WAIT: "traces_max_wait",
                   OVERFLOW: "traces_overflow", SHUTDOWN: "traces_shutdown"}[reason]
        setattr(self.stats, counter, getattr(self.stats, counter) + 1)
        if entry.late:
            self.stats.traces_late += 1
        self._assembled[trace_id] = None
        self._assembled.move_to_end(trace_id)
        while len(self._assembled) > self._remember:
            self._assembled.popitem(last=False)
        spans = sorted(entry.spans.values(), key=lambda s: (s.start_time_unix_nano, s.span_id))
        return AssembledTrace(
            trace_id=trace_id,
            spans=tuple(spans),
            logs=tuple(entry.logs),
            # Overflow cuts a trace short whatever it holds; otherwise a missing root tells.
            incomplete=reason == OVERFLOW or (not entry.has_root and not entry.late),
            reason=reason,
            late=entry.late,
        )

    def _gauges(self) -> None:
        self.stats.traces_buffered = len(self._entries)
        self.stats.items_buffered = self._items
