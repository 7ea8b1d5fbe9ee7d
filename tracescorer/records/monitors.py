"""The rows of the built-in monitors: their stored state and events, and what a window is built from.

The monitors stage (:mod:`tracescorer.monitors`) computes them; the store keeps them
(``monitor_state``, ``monitor_events``) and rebuilds windows from stored scores (``coverage``:
from stored decisions). Both engines
write and read ``monitor_state`` through :func:`state_row` and :func:`state_from_row`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

State = Literal["ok", "pending", "firing", "resolved"]

#: ``ok`` (never fired), ``pending`` (breaching, waiting out ``for``), ``firing``, ``resolved``.
STATES: tuple[State, ...] = ("ok", "pending", "firing", "resolved")

NotificationKind = Literal["firing", "resolved"]

#: The ``result`` label of ``tracescorer_monitor_notifications_total``: ``deferred`` counts firings
#: held back by the cooldown (each is later ``sent``, or ``cancelled`` when it resolved first).
NOTIFY_RESULTS: tuple[str, ...] = ("sent", "failed", "deferred", "cancelled", "dropped")


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorState:
    """What is stored per monitor (``monitor_state``), times in epoch seconds."""

    monitor_id: str
    state: State = "ok"
    since: float | None = None  # when the current state began (pending: when the breach began)
    value: float | None = None  # the last reading
    samples: int = 0
    evaluated_at: float | None = None
    clear_since: float | None = None  # firing: since when readings are clear (keep_firing_for counts from it)
    resolved_at: float | None = None  # when the last firing resolved (a pending that clears returns to it)
    notified_state: NotificationKind | None = None  # what the targets were last told (decided)
    notified_at: float | None = None  # the last firing message (the cooldown and repeat_interval count from it)
    reminders: int = 0  # reminders sent for the current firing
    unsent: NotificationKind | None = None  # a message decided but not yet attempted to the end


#: ``monitor_state``'s columns as the engines write and read them (:func:`state_row`); the field
#: ``unsent`` is the column ``pending`` (named before ``pending`` was a state), and
#: ``firing_notified`` (the targets were last told ``firing``) is kept for readers of the table.
STATE_COLUMNS: tuple[str, ...] = (
    "monitor_id",
    "state",
    "since",
    "value",
    "samples",
    "evaluated_at",
    "notified_at",
    "firing_notified",
    "pending",
    "clear_since",
    "resolved_at",
    "notified_state",
    "reminders",
)
#: The columns of :data:`STATE_COLUMNS` that are times (epoch seconds in rows, TIMESTAMPTZ stored).
STATE_TIMES: frozenset[str] = frozenset({"since", "evaluated_at", "notified_at", "clear_since", "resolved_at"})


def state_row(s: MonitorState) -> list[Any]:
    """``s`` as values in :data:`STATE_COLUMNS` order."""
    return [
        s.monitor_id,
        s.state,
        s.since,
        s.value,
        s.samples,
        s.evaluated_at,
        s.notified_at,
        s.notified_state == "firing",
        s.unsent,
        s.clear_since,
        s.resolved_at,
        s.notified_state,
        s.reminders,
    ]


def state_from_row(row: Sequence[Any]) -> MonitorState:
    """A :class:`MonitorState` from values in :data:`STATE_COLUMNS` order (times as epoch seconds)."""
    r = dict(zip(STATE_COLUMNS, row, strict=True))
    return MonitorState(
        monitor_id=r["monitor_id"],
        state=cast(State, r["state"]) if r["state"] in STATES else "ok",
        since=r["since"],
        value=r["value"],
        samples=int(r["samples"] or 0),
        evaluated_at=r["evaluated_at"],
        clear_since=r["clear_since"],
        resolved_at=r["resolved_at"],
        notified_state=r["notified_state"],
        notified_at=r["notified_at"],
        reminders=int(r["reminders"] or 0),
        unsent=r["pending"],
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """What a monitor needs of one stored score (``coverage``: of one decision row, its decision
    as ``status``, its detail as ``reason``, its id as ``score_id``)."""

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


def sample_from_row(r: Sequence[Any]) -> Sample:
    """A :class:`Sample` from values in field order (what both engines' rebuild queries select)."""
    return Sample(
        at=float(r[0]),
        score_id=r[1],
        scorer_id=r[2],
        status=r[3],
        score=r[4],
        label=r[5],
        trace_id=r[6],
        conversation_id=r[7],
        run_id=r[8],
        agent=r[9],
        reason=r[10],
    )


@dataclass(slots=True)
class Counts:
    """Totals of one bucket (or of a whole window)."""

    n: int = 0
    ok: int = 0
    score_sum: float = 0.0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    eligible: float = 0.0  # coverage: targets that should have got a score (see add_decision)
    covered: int = 0  # coverage: those that did (decision scored)

    def add(self, other: Counts) -> None:
        self.n += other.n
        self.ok += other.ok
        self.score_sum += other.score_sum
        self.passed += other.passed
        self.failed += other.failed
        self.errors += other.errors
        self.eligible += other.eligible
        self.covered += other.covered

    def add_decision(self, decision: str, sample_rate: float | None) -> None:
        """One live decision row, as ``coverage`` counts it: ``sampled_out`` not at all (the sampler
        let it go on purpose); ``filtered_out`` as the share the binding's sampler would have let in
        (its ``sample_rate``: the filter runs first); every other decision as one eligible target,
        covered when ``scored``."""
        if decision == "sampled_out":
            return
        if decision == "filtered_out":
            self.eligible += 1.0 if sample_rate is None else sample_rate
            return
        self.eligible += 1.0
        if decision == "scored":
            self.covered += 1

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


def score_counts(r: Sequence[Any]) -> Counts:
    """Counts from a rebuild query's values (``n, ok, score_sum, passed, failed, errors``)."""
    return Counts(
        n=int(r[0]), ok=int(r[1]), score_sum=float(r[2]), passed=int(r[3]), failed=int(r[4]), errors=int(r[5])
    )


def decision_counts(r: Sequence[Any]) -> Counts:
    """Coverage counts from a rebuild query's values (``eligible, covered``)."""
    return Counts(eligible=float(r[0]), covered=int(r[1]))


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorEvent:
    """One row of ``monitor_events``: ``fired``, ``resolved``, ``deferred`` (a firing held back by
    the cooldown), ``cancelled`` (a deferred firing that resolved before the cooldown ended),
    ``notified``, ``notify_failed`` or ``dropped`` (queue full / shutdown)."""

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
    ``width_s`` seconds, plus its latest examples (see ``monitors.window.is_example``); with
    ``decisions`` (``coverage``) their live decision rows instead (``Counts.add_decision``), the
    examples being the targets left without a score."""

    index: int
    scorer_ids: tuple[str, ...]
    since: float
    width_s: float
    example_kind: str
    threshold: float
    decisions: bool = False


@dataclass(frozen=True, slots=True)
class Rebuilt:
    buckets: list[tuple[int, int, Counts]]  # (spec index, bucket index, counts)
    examples: list[tuple[int, Sample]]  # (spec index, sample), oldest first
