"""The built-in monitors in the daemon: fed by committed scores, evaluated on a timer, stored.

Evaluation is incremental: each committed live score is added to the windows of the monitors
watching its scorer (each committed live decision to those of its ``coverage`` monitors), and
those monitors are evaluated at once; a timer re-evaluates every monitor so windows slide when
nothing arrives. The scores table (``scoring_decisions`` for coverage) is read once, at start, to
rebuild the windows (bounded: one row per monitor and bucket, a few examples per monitor).

The alert states are :mod:`~tracescorer.monitors.evaluator`'s, what is sent is
:mod:`~tracescorer.monitors.policy`'s; the one-second timer makes a pending monitor fire, a held-back
firing go out when its cooldown ends and reminders go out while nothing else happens.

State survives restarts: the stored state is loaded before the first evaluation, so a monitor
that was pending keeps counting from when its breach began, one that was firing and still
breaches stays firing without a new notification, and the cooldown and reminders count from the
stored time of the last firing message. A notification decided but not sent before a stop
(``unsent``) is sent after the next start if it is still true.

Start this before the scoring runner (no score may arrive between the rebuild query and the
first live score), stop it after the runner (the last scores are evaluated).

With several daemons on one PostgreSQL store (``shared``) one daemon runs the monitors (the app
elects it with a PostgreSQL advisory lock) and its windows must count every daemon's scores: they
are rebuilt from the shared scores table every ``rebuild_interval_s`` instead of being fed by this
daemon's own scores. State and events live in PostgreSQL, so the daemon that takes over after the
leader stops starts from the stored state (no repeated notification, the same cooldown).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import math
import time
from collections.abc import Sequence

from tracescorer.aio import cancel
from tracescorer.clock import SYSTEM_CLOCK, Clock
from tracescorer.config.monitors import MonitorSettings, format_duration
from tracescorer.metrics import Metrics
from tracescorer.monitors.evaluator import evaluate
from tracescorer.monitors.messages import Notification, build
from tracescorer.monitors.notify import Delivery, Dispatcher
from tracescorer.monitors.persist import StateWriter
from tracescorer.monitors.policy import Notice, after_restart, decide
from tracescorer.monitors.window import MAX_EXAMPLES, Window, decision_sample, score_sample
from tracescorer.records.monitors import STATES, MonitorEvent, MonitorState, NotificationKind, Sample, State, WindowSpec
from tracescorer.records.scores import DecisionRecord, ScoreRecord
from tracescorer.store.api import MonitorStore

log = logging.getLogger(__name__)


class MonitorService:
    """Owns the monitors' windows, states and notifications; runs on the daemon's event loop.
    ``clock`` measures windows, pending periods, cooldowns and reminders (stop deadlines are the
    machine's monotonic seconds)."""

    def __init__(
        self,
        monitors: Sequence[MonitorSettings],
        scorer_ids: Sequence[str],
        store: MonitorStore,
        metrics: Metrics,
        *,
        clock: Clock = SYSTEM_CLOCK,
        tick_s: float = 1.0,
        persist_interval_s: float = 10.0,
        rebuild_interval_s: float | None = None,
    ) -> None:
        self._monitors = list(monitors)
        self._store = store
        self._metrics = metrics
        self._clock = clock
        self._tick_s = tick_s
        self._scorers = [tuple(s for s in scorer_ids if m.matches(s)) for m in self._monitors]
        # (whether it counts decisions, scorer id) -> the monitors watching that scorer's rows
        self._watching: dict[tuple[bool, str], list[int]] = {}
        for i, ids in enumerate(self._scorers):
            for scorer_id in ids:
                self._watching.setdefault((self._monitors[i].aggregate == "coverage", scorer_id), []).append(i)
        self._windows = [Window(m) for m in self._monitors]
        self._states = [MonitorState(monitor_id=m.id) for m in self._monitors]
        self._outstanding = [0] * len(self._monitors)
        self._dispatcher = Dispatcher(self._delivered)
        self._writer = StateWriter(store, lambda i: self._states[i], interval_s=persist_interval_s)
        self._task: asyncio.Task[None] | None = None
        self._running = False
        self._rebuild_interval_s = rebuild_interval_s
        self._rebuilt_at = 0.0

    @property
    def monitors(self) -> list[MonitorSettings]:
        return list(self._monitors)

    def state(self, monitor_id: str) -> MonitorState | None:
        return next((s for s in self._states if s.monitor_id == monitor_id), None)

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Create the tables, load states, rebuild the windows, evaluate, start the timer."""
        if not self._monitors:
            return
        now = self._clock.time()
        await self._store.prune_monitor_events(now)
        stored = {s.monitor_id: s for s in await self._store.monitor_states([m.id for m in self._monitors])}
        self._states = [stored.get(m.id, MonitorState(monitor_id=m.id)) for m in self._monitors]
        await self._rebuild(now)
        await self._dispatcher.start()
        self._running = True
        now = self._clock.time()
        for i in range(len(self._monitors)):
            self._evaluate(i, now, restart=True)
        self._writer.flush(now, force=True)
        self._task = asyncio.create_task(self._tick(), name="monitors-tick")
        log.info(
            "monitors: %d started (%s)",
            len(self._monitors),
            ", ".join(f"{s.monitor_id}={s.state}" for s in self._states),
        )

    async def _rebuild(self, now: float) -> None:
        """Windows from the stored live scores (one bounded query)."""
        specs = []
        for i, (monitor, window) in enumerate(zip(self._monitors, self._windows, strict=False)):
            first = window.bucket_of(now - monitor.window_s)
            specs.append(
                WindowSpec(
                    index=i,
                    scorer_ids=self._scorers[i],
                    since=first * window.width_s,
                    width_s=window.width_s,
                    example_kind=window.kind,
                    threshold=monitor.threshold,
                    decisions=monitor.aggregate == "coverage",
                )
            )
        rebuilt = await self._store.rebuild_monitor_windows(specs, MAX_EXAMPLES)
        self._windows = [Window(m) for m in self._monitors]
        for index, bucket, counts in rebuilt.buckets:
            self._windows[index].add_counts(bucket, counts)
        for index, sample in rebuilt.examples:
            self._windows[index].add_example(sample)
        self._rebuilt_at = self._clock.monotonic()

    async def stop(self, deadline: float) -> bool:
        """Stop the timer, send queued notifications until ``deadline`` (monotonic seconds), store
        the states; whether every notification was sent."""
        if not self._running:
            return True
        self._running = False
        await cancel([self._task])
        abandoned = await self._dispatcher.shutdown(max(0.0, deadline - time.monotonic()))
        if abandoned:
            log.warning(
                "monitors: %d notification(s) not sent before the stop deadline; they are sent after the next start",
                abandoned,
            )
        self._writer.flush(self._clock.time(), force=True)
        await self._writer.drain(deadline - time.monotonic())
        return not abandoned

    # --- intake ---------------------------------------------------------------------------------

    def on_scores(self, scores: Sequence[ScoreRecord]) -> None:
        """ScoreListener: add committed live scores to the windows that watch them, evaluate those."""
        if self._fed:
            now = self._clock.time()
            live = [r for r in scores if r.source == "live" and (False, r.scorer_id) in self._watching]
            self._add(now, False, [(score_sample(r, now), None) for r in live])

    def on_decisions(self, decisions: Sequence[DecisionRecord]) -> None:
        """DecisionListener: add committed live decisions to the coverage windows, evaluate those."""
        if self._fed:
            now = self._clock.time()
            live = [d for d in decisions if d.source == "live" and (True, d.scorer_id) in self._watching]
            self._add(now, True, [(decision_sample(d, now), d.sample_rate) for d in live])

    @property
    def _fed(self) -> bool:
        """Running on this daemon's own rows (shared: the windows are rebuilt from every daemon's)."""
        return self._running and self._rebuild_interval_s is None

    def _add(self, now: float, decisions: bool, rows: list[tuple[Sample, float | None]]) -> None:
        """Add scores (or decisions, with their binding's sampling ratio) to their windows, evaluate those."""
        touched: set[int] = set()
        for sample, rate in rows:
            for i in self._watching.get((decisions, sample.scorer_id), ()):
                self._windows[i].add(sample, rate)
                touched.add(i)
        for i in sorted(touched):
            self._evaluate(i, now)
        self._writer.flush(now)

    def evaluate_now(self) -> None:
        """Evaluate every monitor at the clock's current time (what the timer does each tick)."""
        if not self._running:
            return
        now = self._clock.time()
        for i in range(len(self._monitors)):
            self._evaluate(i, now)
        self._writer.flush(now)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self._tick_s)
            try:
                if (
                    self._rebuild_interval_s is not None
                    and self._clock.monotonic() - self._rebuilt_at >= self._rebuild_interval_s
                ):
                    await self._rebuild(self._clock.time())
                self.evaluate_now()
            except Exception:  # the timer must survive whatever one pass hits
                log.exception("monitor evaluation failed")

    # --- evaluation -----------------------------------------------------------------------------

    def _evaluate(self, i: int, now: float, *, restart: bool = False) -> None:
        monitor = self._monitors[i]
        before = self._states[i]
        step = evaluate(monitor, before, self._windows[i].read(now), now)
        state, resend = after_restart(step.state) if restart else (step.state, None)
        if resend is not None:
            log.info("monitor %s: sending the %s notification left unsent by the last stop", monitor.id, resend)
            notice = Notice(send=resend, reminder=state.reminders if resend == "firing" else 0)
        else:
            state, notice = decide(monitor, before, state, now)
        self._states[i] = state
        self._set_gauges(i)
        if step.entered is not None:
            self._entered(i, before.state, step.entered, now)
        if notice.deferred_until is not None:
            self._held(
                i,
                "deferred",
                now,
                f"cooldown {monitor.cooldown}: the last firing message went at "
                f"{_fmt_time(state.notified_at)}; sent at {_fmt_time(notice.deferred_until)} if still firing",
            )
        if notice.cancelled:
            self._held(i, "cancelled", now, "resolved before the cooldown ended: the held-back firing was not sent")
        if notice.send is not None:
            self._send(i, notice.send, now, reminder=notice.reminder)
        if step.entered is not None or (state.notified_state, state.notified_at, state.unsent) != (
            before.notified_state,
            before.notified_at,
            before.unsent,
        ):
            self._writer.changed(i)
        elif (state.value, state.samples, state.clear_since) != (before.value, before.samples, before.clear_since):
            self._writer.stale(i)

    def _entered(self, i: int, was: State, entered: State, now: float) -> None:
        """Count, log and record a state change."""
        monitor, state = self._monitors[i], self._states[i]
        if was == "pending" and entered != "firing":
            log.debug(
                "monitor %s: no longer breaching before %s passed; back to %s",
                monitor.id,
                format_duration(monitor.for_s),
                entered,
            )
            return
        self._metrics.monitor_transitions.labels(monitor.id, entered).inc()
        if entered == "pending":
            log.debug("monitor %s pending: breaching, firing after %s", monitor.id, format_duration(monitor.for_s))
            return
        if entered == "firing":
            held = f"breaching for {format_duration(monitor.for_s)} (for)" if monitor.for_s else None
            self._event(i, "fired", now, detail=held)
            log.warning(
                "monitor %s firing: %s %s %g is %s over %s (%d samples)",
                monitor.id,
                monitor.aggregate,
                monitor.comparison,
                monitor.threshold,
                _fmt(state.value),
                monitor.window,
                state.samples,
            )
            return
        kept = monitor.keep_firing_for_s
        self._event(i, "resolved", now, detail=f"clear for {format_duration(kept)} (keep_firing_for)" if kept else None)
        log.info(
            "monitor %s resolved: %s is %s over %s (%d samples)",
            monitor.id,
            monitor.aggregate,
            _fmt(state.value),
            monitor.window,
            state.samples,
        )

    def _held(self, i: int, result: str, now: float, detail: str) -> None:
        """A firing held back by the cooldown (``deferred``), or dropped because it resolved first (``cancelled``)."""
        monitor = self._monitors[i]
        for target in monitor.notify:
            self._metrics.monitor_notifications.labels(monitor.id, target.kind, result).inc()
        self._event(i, result, now, detail=detail)
        log.info("monitor %s: firing notification %s: %s", monitor.id, result, detail)

    def _send(self, i: int, kind: NotificationKind, now: float, *, reminder: int = 0) -> None:
        monitor, state, window = self._monitors[i], self._states[i], self._windows[i]
        notification = build(
            monitor,
            kind,
            value=state.value,
            samples=state.samples,
            since=state.since or now,
            at=now,
            examples=window.recent_examples(now),
            reminder=reminder,
        )
        if self._dispatcher.submit(notification, monitor.notify):
            self._outstanding[i] += 1
            return
        for target in monitor.notify:
            self._metrics.monitor_notifications.labels(monitor.id, target.kind, "dropped").inc()
            self._event(i, "dropped", now, target=target.display, detail="notification queue full or stopped")
        log.error("monitor %s: %s notification dropped (queue full or shutting down)", monitor.id, kind)
        self._clear_unsent(i)

    def _delivered(self, notification: Notification, deliveries: Sequence[Delivery]) -> None:
        """Dispatcher callback (on the loop): count, record, and clear the unsent mark."""
        i = next(k for k, m in enumerate(self._monitors) if m.id == notification.monitor_id)
        now = self._clock.time()
        for d in deliveries:
            result = "sent" if d.ok else "failed"
            self._metrics.monitor_notifications.labels(notification.monitor_id, d.target.kind, result).inc()
            kind = notification.kind + (f" (reminder {notification.reminder})" if notification.reminder else "")
            detail = f"{kind}, {d.attempts} attempt(s)" + ("" if d.ok else f": {d.error}")
            self._event(i, "notified" if d.ok else "notify_failed", now, target=d.target.display, detail=detail)
            if not d.ok:
                log.error(
                    "monitor %s: %s notification to %s failed after %d attempt(s): %s",
                    notification.monitor_id,
                    notification.kind,
                    d.target.display,
                    d.attempts,
                    d.error,
                )
        self._outstanding[i] -= 1
        if self._outstanding[i] == 0:
            self._clear_unsent(i)
        self._writer.flush(now, force=True)

    def _clear_unsent(self, i: int) -> None:
        state = self._states[i]
        if state.unsent is not None:
            self._states[i] = dataclasses.replace(state, unsent=None)
            self._writer.changed(i)

    def _event(self, i: int, event: str, now: float, *, target: str | None = None, detail: str | None = None) -> None:
        state = self._states[i]
        self._writer.event(
            MonitorEvent(
                monitor_id=state.monitor_id,
                at=now,
                event=event,
                state=state.state,
                value=state.value,
                samples=state.samples,
                target=target,
                detail=detail,
            )
        )

    def _set_gauges(self, i: int) -> None:
        m, state, monitor_id = self._metrics, self._states[i], self._monitors[i].id
        for name in STATES:
            m.monitor_state.labels(monitor_id, name).set(1 if state.state == name else 0)
        m.monitor_value.labels(monitor_id).set(math.nan if state.value is None else state.value)
        m.monitor_samples.labels(monitor_id).set(state.samples)
        if state.evaluated_at is not None:
            m.monitor_evaluated.labels(monitor_id).set(state.evaluated_at)


def _fmt(value: float | None) -> str:
    return "no data" if value is None else f"{value:.4g}"


def _fmt_time(epoch: float | None) -> str:
    if epoch is None:
        return "never"
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="seconds")
