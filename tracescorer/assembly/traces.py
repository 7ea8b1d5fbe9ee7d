"""What assembly hands out: a trace with its items (:class:`AssembledTrace`), the buffer's counters,
and which span is a trace's root."""

from __future__ import annotations

from dataclasses import dataclass

from tracescorer.model import LogRecord, Span

# OTLP SpanFlags: bit 8 says whether bit 9 ("parent is remote") is known.
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200

COMPLETE, MAX_WAIT, OVERFLOW, SHUTDOWN, RECOVERED = "complete", "max_wait", "overflow", "shutdown", "recovered"
COUNTERS = {
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
    memory (``spans``/``logs`` are empty). In both cases the caller reads the trace back from the
    segment log, at ``offsets`` (the log records that held its items).
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
    offsets: tuple[int, ...] = ()
    recovered: bool = False  # replayed from the segment log, or tracked again after a failed write

    @property
    def from_store(self) -> bool:
        """Whether the trace's items must be read back from the segment log."""
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


def is_root(span: Span) -> bool:
    """No parent, or a parent in another process (OTLP ``SPAN_FLAGS_CONTEXT_IS_REMOTE``)."""
    if not span.parent_span_id:
        return True
    return bool(span.flags & _HAS_IS_REMOTE) and bool(span.flags & _IS_REMOTE)
