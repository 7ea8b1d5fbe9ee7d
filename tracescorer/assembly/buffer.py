"""Track traces until they are complete; keep their spans in memory while there is room.

A trace is *complete* when its root span has arrived (OTLP only exports ended spans) and nothing
arrived for it for ``idle_s``; it is *timed out* when ``max_wait_s`` passed since its first span,
root or not. A root is a span without a parent span id, or one whose parent lives in another
process (OTLP span flags say "parent is remote") — a service that is only one hop of a
distributed trace never sees a parentless span.

Memory is bounded twice:

* ``max_spans`` bounds the spans and log records held in memory (the *window*). Beyond it the
  oldest traces are **spilled**: their items are dropped from memory and only a small entry
  remains (first/last seen, whether the root came). Every item is already in the span log, so a
  spilled trace is handed out with ``spilled=True`` and the caller reads it back from there.
* ``max_traces`` bounds the entries themselves. The daemon refuses new telemetry while the buffer
  is :attr:`full`; should entries still exceed the bound, the oldest are handed out at once,
  marked incomplete (``overflow``), never dropped.

Items arriving for a trace that was already handed out start a new entry; when that entry
completes it comes back with ``late=True`` and the caller re-reads the whole trace from the span
log and upserts its runs (run ids are deterministic, so this replaces, not adds).

Not thread-safe: one asyncio loop (or one thread) owns a buffer. Time comes from the injected
``clock`` (monotonic seconds) so tests can drive it. Each entry also keeps the range of
``received_at`` (the span log's commit time) its items got, which bounds the read of a spilled
trace to exactly the rows it needs.
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

COMPLETE, MAX_WAIT, OVERFLOW, SHUTDOWN, RECOVERED = "complete", "max_wait", "overflow", "shutdown", "recovered"
_COUNTERS = {
    COMPLETE: "traces_complete",
    MAX_WAIT: "traces_max_wait",
    OVERFLOW: "traces_overflow",
    SHUTDOWN: "traces_shutdown",
    RECOVERED: "traces_recovered",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class AssembledTrace:
    """A trace handed to extraction.

    ``reason``: ``complete`` (root ended, then quiet for ``idle_s``), ``max_wait``, ``overflow``,
    ``shutdown`` or ``recovered``. ``incomplete`` is True on overflow and when no root span was
    seen (a late entry is judged by the caller on the whole stored trace). ``late``: the trace had
    been handed out before, these are only the late items. ``spilled``: the items are not in
    memory (``spans``/``logs`` are empty). In both cases the caller reads the trace from the span
    log; ``received`` (epoch seconds: when its first and last items were committed) bounds that
    read for a spilled, non-late trace.
    """

    trace_id: str
    spans: tuple[Span, ...]
    logs: tuple[LogRecord, ...]
    incomplete: bool
    reason: str
    late: bool = False
    spilled: bool = False
    received: tuple[float, float] = (0.0, 0.0)
    due: float = 0.0  # clock time it became ready (how late assembly is: now - due)

    @property
    def from_store(self) -> bool:
        """Whether the trace's items must be read from the span log."""
        return self.late or self.spilled


@dataclass(slots=True)
class BufferStats:
    """Counters for metrics (monotonic except the ``*_buffered`` gauges)."""

    spans_added: int = 0
    duplicate_spans: int = 0
    logs_added: int = 0
    logs_without_trace: int = 0
    traces_complete: int = 0
    traces_max_wait: int = 0
    traces_overflow: int = 0
    traces_shutdown: int = 0
    traces_late: int = 0
    traces_recovered: int = 0
    traces_spilled: int = 0
    traces_buffered: int = 0
    items_buffered: int = 0


@dataclass(slots=True)
class _Entry:
    first_seen: float
    last_seen: float
    first_received: float
    last_received: float
    spans: dict[str, Span] | None = field(default_factory=dict)  # None once spilled
    logs: list[LogRecord] | None = field(default_factory=list)
    has_root: bool = False
    late: bool = False
    recovered: bool = False

    @property
    def size(self) -> int:
        """Items held in memory."""
        if self.spans is None or self.logs is None:
            return 0
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
        max_traces: int = 100_000,
        max_spans: int = 50_000,
        clock: Callable[[], float] = time.monotonic,
        remember_assembled: int = 100_000,
    ) -> None:
        if idle_s < 0 or max_wait_s <= 0 or max_traces < 1 or max_spans < 0:
            raise ValueError("idle_s >= 0, max_wait_s > 0, max_traces >= 1, max_spans >= 0 required")
        self.idle_s = idle_s
        self.max_wait_s = max_wait_s
        self.max_traces = max_traces
        self.max_spans = max_spans
        self._clock = clock
        # Insertion order = first seen (for max_wait, spilling and overflow); activity order apart.
        self._entries: dict[str, _Entry] = {}
        self._activity: OrderedDict[str, None] = OrderedDict()
        self._in_memory: OrderedDict[str, None] = OrderedDict()  # entries still holding items
        self._ready: list[AssembledTrace] = []
        self._items = 0
        self._assembled: OrderedDict[str, None] = OrderedDict()
        self._remember = remember_assembled
        self.stats = BufferStats()

    # --- intake -------------------------------------------------------------------------------

    def add_spans(
        self,
        spans: Iterable[Span],
        now: float | None = None,
        received: tuple[float, float] = (0.0, 0.0),
        replayed: bool = False,
    ) -> None:
        """Buffer spans of any traces, in any order; a span id seen twice is kept once.
        ``received``: the commit times the span log gave them. ``replayed``: acknowledged before
        this start (read back from the segment log): their traces stopped arriving when the last
        daemon stopped, so like recovered ones they are complete once idle, root or not."""
        t = self._clock() if now is None else now
        for span in spans:
            entry = self._entry(span.trace_id, t, received)
            entry.has_root = entry.has_root or is_root(span)
            entry.recovered = entry.recovered or replayed
            self.stats.spans_added += 1
            if entry.spans is None:
                continue
            old = entry.spans.get(span.span_id)
            if old is not None:
                self.stats.duplicate_spans += 1
                if span.end_time_unix_nano >= old.end_time_unix_nano:
                    entry.spans[span.span_id] = span
            else:
                entry.spans[span.span_id] = span
                self._items += 1
        self._enforce_bounds()

    def add_logs(
        self,
        records: Iterable[LogRecord],
        now: float | None = None,
        received: tuple[float, float] = (0.0, 0.0),
        replayed: bool = False,
    ) -> None:
        """Buffer log records that name a trace; records without a trace id are only counted
        (``replayed`` as for :meth:`add_spans`)."""
        t = self._clock() if now is None else now
        for rec in records:
            if not rec.trace_id:
                self.stats.logs_without_trace += 1
                continue
            entry = self._entry(rec.trace_id, t, received)
            entry.recovered = entry.recovered or replayed
            self.stats.logs_added += 1
            if entry.logs is not None:
                entry.logs.append(rec)
                self._items += 1
        self._enforce_bounds()

    def add_pending(self, pending: Iterable[tuple[str, float, float, bool]]) -> int:
        """Track traces whose items are only in the span log (recovery at start), as
        ``(trace_id, first and last unassembled item received (epoch s), assembled before)``,
        oldest first. They are complete at once, root or not (they stopped arriving when the last
        daemon stopped; more items later make them late traces). Returns how many were new
        (traces already tracked are left as they are)."""
        t = self._clock() - self.idle_s
        added = []
        for trace_id, first, last, assembled_before in pending:
            if trace_id in self._entries:
                continue
            self._entries[trace_id] = _Entry(
                first_seen=t,
                last_seen=t,
                first_received=first,
                last_received=last,
                spans=None,
                logs=None,
                late=assembled_before,
                recovered=True,
            )
            added.append(trace_id)
        # quiet for longer than anything live: least recently active first
        for trace_id in reversed(added):
            self._activity[trace_id] = None
            self._activity.move_to_end(trace_id, last=False)
        self._enforce_bounds()
        return len(added)

    def _entry(self, trace_id: str, now: float, received: tuple[float, float]) -> _Entry:
        entry = self._entries.get(trace_id)
        if entry is None:
            entry = _Entry(
                first_seen=now,
                last_seen=now,
                first_received=received[0],
                last_received=received[1],
                late=trace_id in self._assembled,
            )
            self._entries[trace_id] = entry
            self._in_memory[trace_id] = None
        else:
            entry.first_received = min(entry.first_received, received[0])
            entry.last_received = max(entry.last_received, received[1])
        entry.last_seen = now
        self._activity[trace_id] = None
        self._activity.move_to_end(trace_id)
        return entry

    def _enforce_bounds(self) -> None:
        while self._items > self.max_spans and self._in_memory:
            oldest, _ = self._in_memory.popitem(last=False)
            entry = self._entries[oldest]
            self._items -= entry.size
            entry.spans = entry.logs = None
            self.stats.traces_spilled += 1
        while len(self._entries) > self.max_traces:
            self._ready.append(self._take(next(iter(self._entries)), OVERFLOW, self._clock()))
        self._gauges()

    @property
    def full(self) -> bool:
        """At the entry bound: the daemon should refuse new telemetry until traces complete."""
        return len(self._entries) >= self.max_traces

    # --- output -------------------------------------------------------------------------------

    def pop_complete(self, now: float | None = None, limit: int | None = None) -> list[AssembledTrace]:
        """Traces ready for extraction (at most ``limit``): overflowed, complete, timed out."""
        t = self._clock() if now is None else now
        cap = limit if limit is not None else len(self._entries) + len(self._ready)
        out, self._ready = self._ready[:cap], self._ready[cap:]
        done: list[tuple[str, str]] = []
        for trace_id in self._activity:  # least recently active first
            if len(out) + len(done) >= cap:
                break
            entry = self._entries[trace_id]
            if t - entry.last_seen < self.idle_s:
                break
            # Late-arriving pieces of an already assembled trace need no root to be complete.
            if entry.has_root or entry.late or entry.recovered:
                done.append((trace_id, COMPLETE))
        done_ids = {d[0] for d in done}
        for trace_id, entry in self._entries.items():  # oldest first
            if len(out) + len(done) >= cap or t - entry.first_seen < self.max_wait_s:
                break
            if trace_id not in done_ids:
                done.append((trace_id, MAX_WAIT))
        out.extend(self._take(trace_id, reason, t) for trace_id, reason in done)
        self._gauges()
        return out

    def pop_all(self) -> list[AssembledTrace]:
        """Everything buffered (for shutdown), oldest first; complete ones are not incomplete."""
        out, self._ready = self._ready, []
        out.extend(self._take(tid, SHUTDOWN, self._clock()) for tid in list(self._entries))
        self._gauges()
        return out

    def __len__(self) -> int:
        return len(self._entries)

    def tracking(self, trace_id: str) -> bool:
        """Whether the trace is waiting in the buffer (not handed out yet)."""
        return trace_id in self._entries or any(t.trace_id == trace_id for t in self._ready)

    @property
    def ready(self) -> int:
        """Overflowed traces waiting to be popped."""
        return len(self._ready)

    def _take(self, trace_id: str, reason: str, now: float) -> AssembledTrace:
        entry = self._entries.pop(trace_id)
        due = {COMPLETE: entry.last_seen + self.idle_s, MAX_WAIT: entry.first_seen + self.max_wait_s}.get(reason, now)
        self._activity.pop(trace_id, None)
        self._in_memory.pop(trace_id, None)
        self._items -= entry.size
        if reason == COMPLETE and entry.recovered:
            reason = RECOVERED
        counter = _COUNTERS[reason]
        setattr(self.stats, counter, getattr(self.stats, counter) + 1)
        if entry.late:
            self.stats.traces_late += 1
        self._assembled[trace_id] = None
        self._assembled.move_to_end(trace_id)
        while len(self._assembled) > self._remember:
            self._assembled.popitem(last=False)
        spilled = entry.spans is None
        spans = (
            ()
            if entry.spans is None
            else tuple(sorted(entry.spans.values(), key=lambda s: (s.start_time_unix_nano, s.span_id)))
        )
        return AssembledTrace(
            trace_id=trace_id,
            spans=spans,
            logs=tuple(entry.logs or ()),
            # Overflow cuts a trace short whatever it holds; otherwise a missing root tells.
            incomplete=reason == OVERFLOW or (not entry.has_root and not entry.late and not entry.recovered),
            reason=reason,
            late=entry.late,
            spilled=spilled,
            received=(entry.first_received, entry.last_received),
            due=due,
        )

    def oldest_received(self) -> float | None:
        """When the oldest item still tracked was committed (None when nothing is tracked): every
        item received before it belongs to a trace that was handed out."""
        times = [e.first_received for e in self._entries.values()]
        times += [t.received[0] for t in self._ready]
        return min(times) if times else None

    def _gauges(self) -> None:
        self.stats.traces_buffered = len(self._entries)
        self.stats.items_buffered = self._items
