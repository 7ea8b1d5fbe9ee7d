"""The rows of the built-in monitors: their stored state and events, and what a window is built from.

The monitors stage (:mod:`tracescorer.monitors`) computes them; the store keeps them
(``monitor_state``, ``monitor_events``) and rebuilds windows from stored scores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

State = Literal["ok", "firing", "resolved"]


STATES: tuple[State, ...] = ("ok", "firing", "resolved")


NotificationKind = Literal["firing", "resolved"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorState:
    """What is stored per monitor (``monitor_state``), times in epoch seconds."""

    monitor_id: str
    state: State = "ok"
    since: float | None = None  # when the current state began
    value: float | None = None  # the last reading
    samples: int = 0
    evaluated_at: float | None = None
    notified_at: float | None = None  # the last firing notification (the cooldown counts from it)
    firing_notified: bool = False  # the current (or last) firing was notified
    pending: NotificationKind | None = None  # a notification decided but not yet attempted to the end


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """What a monitor needs of one stored score."""

    at: float  # epoch seconds the score was stored
    score_id: str
    scorer_id: str
    status: str
    score: float | None
    label: str | None
    trace_id: str | None = None
    conversation_id: str | None = None
    run_id: str | None = None
    agent: str | None = None
    reason: str | None = None


@dataclass(slots=True)
class Counts:
    """Totals of one bucket (or of a whole window)."""

    n: int = 0
    ok: int = 0
    score_sum: float = 0.0
    passed: int = 0
    failed: int = 0
    errors: int = 0

    def add(self, other: Counts) -> None:
        self.n += other.n
        self.ok += other.ok
        self.score_sum += other.score_sum
        self.passed += other.passed
        self.failed += other.failed
        self.errors += other.errors

    def add_sample(self, sample: Sample) -> None:
        self.n += 1
        if sample.status == "ok" and sample.score is not None:
            self.ok += 1
            self.score_sum += sample.score
        if sample.label == "pass":
            self.passed += 1
        elif sample.label == "fail":
            self.failed += 1
        if sample.status == "error":
            self.errors += 1


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorEvent:
    """One row of ``monitor_events``: ``fired``, ``resolved``, ``suppressed`` (a firing inside the
    cooldown), ``notified``, ``notify_failed`` or ``dropped`` (queue full / shutdown)."""

    monitor_id: str
    at: float
    event: str
    state: str | None = None
    value: float | None = None
    samples: int | None = None
    target: str | None = None
    detail: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowSpec:
    """What to rebuild for one monitor: its scorers' live scores since ``since`` in buckets of
    ``width_s`` seconds, plus its latest examples (see ``monitors.window.is_example``)."""

    index: int
    scorer_ids: tuple[str, ...]
    since: float
    width_s: float
    example_kind: str
    threshold: float


@dataclass(frozen=True, slots=True)
class Rebuilt:
    buckets: list[tuple[int, int, Counts]]  # (spec index, bucket index, counts)
    examples: list[tuple[int, Sample]]  # (spec index, sample), oldest first
