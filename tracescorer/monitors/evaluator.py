"""The monitor state machine: ``ok`` → ``firing`` → ``resolved`` → ``firing`` ..., pure and clocked
by its caller.

- A reading *breaches* when it has at least ``min_samples`` samples (``count`` needs none) and
  its value is below/above the threshold.
- ``ok``/``resolved`` → ``firing`` on a breach. The firing is notified unless a firing was
  notified less than ``cooldown`` ago (then it is recorded as suppressed).
- ``firing`` → ``resolved`` when a reading with enough samples no longer breaches, or when the
  window holds nothing to aggregate. Too few samples otherwise keep the state: a quiet hour
  neither raises nor clears an alert on a handful of scores.
- A resolution is notified when the firing it ends was (and ``notify_resolved`` is on).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tracescorer.monitors.config import MonitorSettings
from tracescorer.monitors.window import Reading
from tracescorer.records.monitors import MonitorState, NotificationKind


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    state: MonitorState
    transition: NotificationKind | None = None  # the state just became firing / resolved
    notify: bool = False  # send a notification of ``transition``
    suppressed: bool = False  # a firing inside the cooldown: recorded, not sent


def breaches(monitor: MonitorSettings, reading: Reading) -> bool:
    if reading.value is None:
        return False
    if monitor.aggregate != "count" and reading.samples < monitor.min_samples:
        return False
    if monitor.comparison == "below":
        return reading.value < monitor.threshold
    return reading.value > monitor.threshold


def _clears(monitor: MonitorSettings, reading: Reading) -> bool:
    if reading.value is None:
        return True
    enough = monitor.aggregate == "count" or reading.samples >= monitor.min_samples
    return enough and not breaches(monitor, reading)


def evaluate(monitor: MonitorSettings, state: MonitorState, reading: Reading, now: float) -> Outcome:
    """The next state after ``reading`` at ``now`` (and whether to notify)."""
    current = dataclasses.replace(state, value=reading.value, samples=reading.samples, evaluated_at=now)
    if state.state != "firing":
        if not breaches(monitor, reading):
            return Outcome(state=current)
        cooling = state.notified_at is not None and now - state.notified_at < monitor.cooldown_s
        notify = bool(monitor.notify) and not cooling
        fired = dataclasses.replace(
            current,
            state="firing",
            since=now,
            firing_notified=notify,
            notified_at=now if notify else state.notified_at,
            pending="firing" if notify else None,
        )
        return Outcome(state=fired, transition="firing", notify=notify, suppressed=cooling and bool(monitor.notify))
    if not _clears(monitor, reading):
        return Outcome(state=current)
    notify = state.firing_notified and monitor.notify_resolved and bool(monitor.notify)
    resolved = dataclasses.replace(current, state="resolved", since=now, pending="resolved" if notify else None)
    return Outcome(state=resolved, transition="resolved", notify=notify)
