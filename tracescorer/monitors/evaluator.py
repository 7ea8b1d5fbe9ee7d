"""The alert state machine: ``ok`` → ``pending`` → ``firing`` → ``resolved`` → ``pending`` ...,
pure and clocked by its caller (what is *sent* is :mod:`tracescorer.monitors.policy`'s business).

A reading is one of:

- a *breach*: at least ``min_samples`` samples (``count`` needs none) and the value below/above
  the threshold;
- *clear*: at least ``min_samples`` samples and the value back at or past the recovery threshold
  (``recovery_threshold``, else the threshold itself), or nothing left in the window at all;
- *no verdict*: too few samples. It moves nothing and resets nothing: a quiet hour neither raises
  nor clears an alert on a handful of scores.

Between the threshold and the recovery threshold a reading is neither: a firing monitor stays
firing (and its clear period starts again), a pending one goes back.

- ``ok``/``resolved`` → ``pending`` on a breach (straight to ``firing`` when ``for`` is 0);
- ``pending`` → ``firing`` on a breach at least ``for`` after the breach began; back to the state
  before (``resolved`` if it ever fired, else ``ok``) on a reading with a verdict that is no breach;
- ``firing`` → ``resolved`` on a clear reading at least ``keep_firing_for`` after readings became
  clear (``clear_since``); a breach or a reading inside the recovery band resets ``clear_since``.

This is Prometheus' ``for`` / ``keep_firing_for`` with Grafana's recovery threshold on top.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tracescorer.config.monitors import MonitorSettings
from tracescorer.monitors.window import Reading
from tracescorer.records.monitors import MonitorState, State


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """The state after one reading, and the state it just entered (None: it stayed)."""

    state: MonitorState
    entered: State | None = None


def has_verdict(monitor: MonitorSettings, reading: Reading) -> bool:
    """Enough samples to decide anything (an empty window decides: there is nothing wrong in it)."""
    return reading.value is None or monitor.aggregate == "count" or reading.samples >= monitor.min_samples


def breaches(monitor: MonitorSettings, reading: Reading) -> bool:
    if reading.value is None or not has_verdict(monitor, reading):
        return False
    if monitor.comparison == "below":
        return reading.value < monitor.threshold
    return reading.value > monitor.threshold


def clears(monitor: MonitorSettings, reading: Reading) -> bool:
    if reading.value is None:
        return True
    if not has_verdict(monitor, reading):
        return False
    if monitor.comparison == "below":
        return reading.value >= monitor.recovery
    return reading.value <= monitor.recovery


def evaluate(monitor: MonitorSettings, state: MonitorState, reading: Reading, now: float) -> Step:
    """The state after ``reading`` at ``now`` (epoch seconds)."""
    current = dataclasses.replace(state, value=reading.value, samples=reading.samples, evaluated_at=now)
    if state.state in ("ok", "resolved"):
        if not breaches(monitor, reading):
            return Step(state=current)
        if monitor.for_s <= 0:
            return _fire(current, now)
        return Step(state=dataclasses.replace(current, state="pending", since=now), entered="pending")
    if state.state == "pending":
        if breaches(monitor, reading):
            began = state.since if state.since is not None else now
            if now - began >= monitor.for_s:
                return _fire(current, now)
            return Step(state=current)
        if not has_verdict(monitor, reading):
            return Step(state=current)
        back: State = "resolved" if state.resolved_at is not None else "ok"
        return Step(state=dataclasses.replace(current, state=back, since=state.resolved_at), entered=back)
    # firing
    if clears(monitor, reading):
        clear_since = state.clear_since if state.clear_since is not None else now
        if now - clear_since >= monitor.keep_firing_for_s:
            resolved = dataclasses.replace(current, state="resolved", since=now, resolved_at=now, clear_since=None)
            return Step(state=resolved, entered="resolved")
        return Step(state=dataclasses.replace(current, clear_since=clear_since))
    if has_verdict(monitor, reading):  # breaching, or inside the recovery band: not clear
        return Step(state=dataclasses.replace(current, clear_since=None))
    return Step(state=current)


def _fire(current: MonitorState, now: float) -> Step:
    fired = dataclasses.replace(current, state="firing", since=now, clear_since=None, reminders=0)
    return Step(state=fired, entered="firing")
