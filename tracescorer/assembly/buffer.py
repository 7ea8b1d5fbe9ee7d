"""Track traces until they are complete; keep their spans in memory while there is room.

A trace is *complete* when its root span has arrived (OTLP only exports ended spans) and nothing
arrived for it for ``idle_s``; it is *timed out* when ``max_wait_s`` passed since its first span,
root or not. A root is a span without a parent span id, or one whose parent lives in another
process (OTLP span flags say "parent is remote") — a service that is only one hop of a
distributed trace never sees a parentless span. A trace replayed from the segment log after a
restart needs no root once the replay is over (it stopped arriving when the last daemon stopped);
during the replay its root may still be further on in the log, so it waits for it (unless the
buffer is full: then it is assembled as it is, and again whole if its root comes).

Memory is bounded twice:

* ``max_spans`` bounds the spans and log records held in memory (the *window*). Beyond it the
  oldest traces are **spilled**: their items are dropped from memory and only a small entry
  remains (first/last seen, whether the root came, the segment-log records of its items). Every
  item is in the segment log, so a spilled trace is handed out with ``spilled=True`` and the caller
  reads it back from there.
* ``max_traces`` bounds the entries themselves. The feed waits (its backlog stays in the log)
  while the buffer is :attr:`full`; should entries still exceed the bound, the oldest are handed out at once,
  marked incomplete (``overflow``), never dropped.

Items arriving for a trace that was already handed out start a new entry; when that entry
completes it comes back with ``late=True`` and the caller re-reads the whole trace from the segment
log and upserts its runs (run ids are deterministic, so this replaces, not adds).

Not thread-safe: one asyncio loop (or one thread) owns a buffer. Time comes from the injected
``clock`` (monotonic seconds) so tests can drive it. Each entry also keeps when its first and
last items were handled (``received``, epoch seconds), for the assembly record.

The buffer tracks, per trace, the segment-log records its items came in, hands them out with the
trace, remembers them for assembled traces (so late items read the whole trace back), and says
which record the oldest trace not handed out needs (:meth:`TraceBuffer.oldest_offset`): the feed
keeps the log from there.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tracescorer.assembly.traces import (
    COMPLETE,
    COUNTERS,
    MAX_WAIT,
    OVERFLOW,
    RECOVERED,
    SHUTDOWN,
    AssembledTrace,
    BufferStats,
    is_root,
)
from tracescorer.model import LogRecord, Span

__all__ = ["AssembledTrace", "BufferStats", "TraceBuffer", "is_root"]


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
    offsets: set[int] | None = None  # the log records holding its items, when the buffer tracks them

    @property
    def size(self) -> int:
        """Items held in memory."""
        if self.spans is None or self.logs is None:
            return 0
        return len(self.spans) + len(self.logs)


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
        # assembled traces, with the log records of their items when tracked
        self._assembled: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._remember = remember_assembled
        self.stats = BufferStats()
        #: the feed is replaying what was acknowledged before this start (:meth:`replay_over` ends it)
        self.replaying = False

    # --- intake -------------------------------------------------------------------------------

    def add_spans(
        self,
        spans: Iterable[Span],
        now: float | None = None,
        received: tuple[float, float] = (0.0, 0.0),
        replayed: bool = False,
        offsets: Sequence[int] | None = None,
    ) -> None:
        """Buffer spans of any traces, in any order; a span id seen twice is kept once.
        ``received``: when the feed handled them. ``replayed``: acknowledged before
        this start (read back from the segment log): their traces stopped arriving when the last
        daemon stopped, so once the replay is over (:attr:`replaying` cleared by the caller) they
        are complete once idle, root or not.
        ``offsets``: each span's log record (kept when the buffer tracks offsets)."""
        t = self._clock() if now is None else now
        for i, span in enumerate(spans):
            entry = self._entry(span.trace_id, t, received)
            if entry.offsets is not None and offsets is not None:
                entry.offsets.add(offsets[i])
            entry.has_root = entry.has_root or is_root(span)
            entry.recovered = entry.recovered or replayed
            self.replaying = self.replaying or replayed
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
        offsets: Sequence[int] | None = None,
    ) -> None:
        """Buffer log records that name a trace; records without a trace id are only counted
        (``replayed`` and ``offsets`` as for :meth:`add_spans`)."""
        t = self._clock() if now is None else now
        for i, rec in enumerate(records):
            if not rec.trace_id:
                self.stats.logs_without_trace += 1
                continue
            entry = self._entry(rec.trace_id, t, received)
            if entry.offsets is not None and offsets is not None:
                entry.offsets.add(offsets[i])
            entry.recovered = entry.recovered or replayed
            self.replaying = self.replaying or replayed
            self.stats.logs_added += 1
            if entry.logs is not None:
                entry.logs.append(rec)
                self._items += 1
        self._enforce_bounds()

    def add_pending(
        self, pending: Iterable[tuple[str, float, float, bool]], offsets: Mapping[str, Iterable[int]] | None = None
    ) -> int:
        """Track traces whose items are in the segment log at ``offsets`` only (assembly could not
        store them and tries them again), as ``(trace_id, first and last unassembled
        item received (epoch s), assembled before)``, oldest first. They are complete at once, root
        or not (they stopped arriving when the last daemon stopped; more items later make them
        late traces). Returns how many were new: a trace already tracked is read back whole when it
        is taken (its items in memory came since; those records hold the rest)."""
        t = self._clock() - self.idle_s
        added = []
        for trace_id, first, last, assembled_before in pending:
            tracked = self._entries.get(trace_id)
            if tracked is not None:
                if tracked.spans is not None:
                    tracked.late = True
                else:  # read back already: over both ranges
                    tracked.first_received = min(tracked.first_received or first, first)
                    tracked.last_received = max(tracked.last_received, last)
                if tracked.offsets is not None and offsets is not None:
                    tracked.offsets.update(offsets.get(trace_id, ()))
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
                offsets=set(offsets.get(trace_id, ())) if offsets is not None else None,
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
            before = self._assembled.get(trace_id)
            entry = _Entry(
                first_seen=now,
                last_seen=now,
                first_received=received[0],
                last_received=received[1],
                late=before is not None,
                # late items: the trace is read back whole, from the records it was assembled from
                offsets=set(before or ()),
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
        """At the entry bound: the feed should wait until traces complete (its backlog stays in the log)."""
        return len(self._entries) >= self.max_traces

    # --- output -------------------------------------------------------------------------------

    def pop_complete(self, now: float | None = None, limit: int | None = None) -> list[AssembledTrace]:
        """Traces ready for extraction (at most ``limit``): overflowed, complete, timed out."""
        t = self._clock() if now is None else now
        cap = limit if limit is not None else len(self._entries) + len(self._ready)
        out, self._ready = self._ready[:cap], self._ready[cap:]
        done: list[tuple[str, str]] = []
        full = self.full
        for trace_id in self._activity:  # least recently active first
            if len(out) + len(done) >= cap:
                break
            entry = self._entries[trace_id]
            if t - entry.last_seen < self.idle_s:
                break
            # Late-arriving pieces of an already assembled trace need no root to be complete; a
            # replayed one needs none once the replay is over (its root may be further on in the
            # log), or while the buffer is full (it is assembled again whole if its root comes)
            if entry.has_root or entry.late or (entry.recovered and (not self.replaying or full)):
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
        counter = COUNTERS[reason]
        setattr(self.stats, counter, getattr(self.stats, counter) + 1)
        if entry.late:
            self.stats.traces_late += 1
        offsets = tuple(sorted(entry.offsets)) if entry.offsets is not None else ()
        self._assembled[trace_id] = offsets
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
            offsets=offsets,
            recovered=entry.recovered,
        )

    def oldest_received(self) -> float | None:
        """When the oldest item still tracked was committed (None when nothing is tracked): every
        item received before it belongs to a trace that was handed out."""
        times = [e.first_received for e in self._entries.values()]
        times += [t.received[0] for t in self._ready]
        return min(times) if times else None

    def oldest_offset(self) -> int | None:
        """The first log record an item still tracked came in (None: none tracked, or the buffer
        does not track offsets): the feed keeps the segment log from there."""
        found = [min(e.offsets) for e in self._entries.values() if e.offsets]
        found += [t.offsets[0] for t in self._ready if t.offsets]
        return min(found) if found else None

    def _gauges(self) -> None:
        self.stats.traces_buffered = len(self._entries)
        self.stats.items_buffered = self._items
