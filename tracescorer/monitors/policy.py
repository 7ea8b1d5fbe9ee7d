"""What a monitor sends, decided after each evaluation: pure, clocked by its caller.

The rule: the targets' last message is the monitor's true state. ``notified_state`` in the
stored state is what they were last told; each evaluation compares it with the state:

- **firing, not told so**: send ``firing`` unless a firing message went out less than
  ``cooldown`` ago; then it is *deferred* and sent at the end of the cooldown if the monitor
  still fires (the evaluations after it find it still untold). A deferred firing that resolves
  before then is *cancelled*: the targets' last message, ``resolved``, is true again.
- **firing, told so**: a reminder (``firing`` again, numbered) every ``repeat_interval`` after the
  last firing message (never sooner than ``cooldown``).
- **not firing, told firing**: send ``resolved`` at once (the cooldown never holds a resolve
  back). With ``notify_resolved: false`` nothing is sent and the targets stay told ``firing``
  until the next firing message, as asked.

``pending`` is not firing: nothing is sent while a monitor waits out ``for``. A monitor without
targets sends nothing and records nothing here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tracescorer.config.monitors import MonitorSettings
from tracescorer.records.monitors import MonitorState, NotificationKind


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice:
    """What to do after an evaluation: send a message, or record that one is held back or dropped."""

    send: NotificationKind | None = None
    reminder: int = 0  # >0: the n-th reminder of a firing already sent
    deferred_until: float | None = None  # a firing just held back by the cooldown, due then
    cancelled: bool = False  # a held-back firing resolved before its cooldown ended: never sent


NOTHING = Notice()


def cooldown_end(monitor: MonitorSettings, state: MonitorState) -> float | None:
    """When the next firing message may go out (None: now)."""
    if state.notified_at is None or monitor.cooldown_s <= 0:
        return None
    return state.notified_at + monitor.cooldown_s


def reminder_due(monitor: MonitorSettings, state: MonitorState) -> float | None:
    """When the next reminder of a told firing is due (None: no reminders)."""
    if monitor.repeat_interval_s <= 0 or state.notified_at is None:
        return None
    return state.notified_at + max(monitor.repeat_interval_s, monitor.cooldown_s)


def decide(
    monitor: MonitorSettings, before: MonitorState, state: MonitorState, now: float
) -> tuple[MonitorState, Notice]:
    """The notification to send after ``before`` became ``state`` at ``now``, and the state with
    it recorded (``notified_*``, ``reminders``, ``unsent``)."""
    if not monitor.notify:
        return state, NOTHING
    told = state.notified_state
    if state.state == "firing":
        if told != "firing":
            due = cooldown_end(monitor, state)
            if due is None or now >= due:
                sent = dataclasses.replace(
                    state, notified_state="firing", notified_at=now, reminders=0, unsent="firing"
                )
                return sent, Notice(send="firing")
            if before.state != "firing":  # it fired just now, inside the cooldown
                return state, Notice(deferred_until=due)
            return state, NOTHING
        due = reminder_due(monitor, state)
        if due is not None and now >= due:
            n = state.reminders + 1
            return dataclasses.replace(state, notified_at=now, reminders=n, unsent="firing"), Notice(
                send="firing", reminder=n
            )
        return state, NOTHING
    if told == "firing":
        if monitor.notify_resolved:
            return dataclasses.replace(state, notified_state="resolved", unsent="resolved"), Notice(send="resolved")
        return dataclasses.replace(state, notified_state="resolved"), NOTHING
    if before.state == "firing" and before.notified_state != "firing":  # it resolved while held back
        return state, Notice(cancelled=True)
    return state, NOTHING


def after_restart(state: MonitorState) -> tuple[MonitorState, NotificationKind | None]:
    """A message decided before a stop and not attempted to the end (``unsent``): send it again
    when it is still true (the first return's ``unsent`` kept, the kind second); else the targets
    still hold the message before it, which is true again, so it is dropped."""
    if state.unsent is None:
        return state, None
    truth: NotificationKind = "firing" if state.state == "firing" else "resolved"
    if state.unsent == truth:
        return state, truth
    return dataclasses.replace(state, notified_state=truth, unsent=None), None
