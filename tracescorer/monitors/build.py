"""The daemon's monitors from the settings: the service itself on one daemon, or
:class:`LeadingMonitors` when several daemons share the store and elect one to run them; held by
:class:`Monitors`, which a configuration reload gives a new set."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from tracescorer.clock import SYSTEM_CLOCK, Clock
from tracescorer.config.monitors import MonitorSettings
from tracescorer.metrics import Metrics
from tracescorer.monitors.leader import LeadingMonitors
from tracescorer.monitors.service import MonitorService
from tracescorer.records.scores import DecisionRecord, ScoreRecord
from tracescorer.store.api import Leadership, MonitorStore

log = logging.getLogger(__name__)

#: what a reload gives the monitors it replaces to send their queued notifications (those left
#: are marked unsent and sent by their successors)
RELOAD_STOP_S = 5.0

Running = MonitorService | LeadingMonitors


class Monitors:
    """The configured monitors (none at all is a set too), fed with the committed scores and
    decisions; :meth:`reload` replaces the set when it changed. A
    :class:`~tracescorer.lifecycle.Component` and a score and decision listener."""

    def __init__(
        self,
        build: Callable[[Sequence[MonitorSettings], Sequence[str]], Running | None],
        monitors: Sequence[MonitorSettings],
        scorer_ids: Sequence[str],
    ) -> None:
        self._build = build
        self._key = _key(monitors, scorer_ids)
        self._started = False
        self.running = build(monitors, scorer_ids)

    def on_scores(self, scores: Sequence[ScoreRecord]) -> None:
        if self.running is not None:
            self.running.on_scores(scores)

    def on_decisions(self, decisions: Sequence[DecisionRecord]) -> None:
        if self.running is not None:
            self.running.on_decisions(decisions)

    async def start(self) -> None:
        self._started = True
        if self.running is not None:
            await self.running.start()

    async def stop(self, deadline: float) -> bool:
        self._started = False
        return await self.running.stop(deadline) if self.running is not None else True

    async def reload(self, monitors: Sequence[MonitorSettings], scorer_ids: Sequence[str]) -> bool:
        """A new set (when it differs: a monitor added, removed or changed, or the scorers a
        monitor watches): the running monitors stop (storing their state), the new ones start
        from the stored states and scores, so an unchanged monitor goes on where it was (pending
        since the same time, firing without a new notification). True when it changed."""
        key = _key(monitors, scorer_ids)
        if key == self._key:
            return False
        old, self.running, self._key = self.running, None, key
        if old is not None and self._started:
            await old.stop(time.monotonic() + RELOAD_STOP_S)
        new = self._build(monitors, scorer_ids)
        if new is not None and self._started:
            await new.start()  # the windows count what was stored meanwhile
        self.running = new
        log.info("monitors reloaded: %s", ", ".join(m.id for m in monitors) or "none")
        return True


def _key(monitors: Sequence[MonitorSettings], scorer_ids: Sequence[str]) -> object:
    return [(m, tuple(s for s in scorer_ids if m.matches(s))) for m in monitors]


def build_monitors(
    monitors: Sequence[MonitorSettings],
    scorer_ids: Sequence[str],
    store: MonitorStore,
    metrics: Metrics,
    *,
    shared: bool,
    rebuild_s: float,
    leadership: Callable[[str], Leadership] | None,
    clock: Clock = SYSTEM_CLOCK,
) -> Monitors:
    """The ``monitors:`` configured (none running without any) over the scorers ``scorer_ids``, on
    ``store``. ``shared``: other processes write scores too (several daemons, or worker processes),
    so the windows are recounted from the store every ``rebuild_s`` (``store.monitor_rebuild_s``);
    ``leadership`` (several daemons): one of them runs the monitors; ``clock`` measures their
    windows, pending periods, cooldowns, reminders and recounts."""

    def build(monitors: Sequence[MonitorSettings], scorer_ids: Sequence[str]) -> Running | None:
        if not monitors:
            return None

        def service() -> MonitorService:
            return MonitorService(
                monitors,
                scorer_ids,
                store,
                metrics,
                clock=clock,
                rebuild_interval_s=rebuild_s if shared else None,
            )

        if leadership is not None:
            return LeadingMonitors(service, leadership("monitors"))  # one daemon of several runs them
        return service()

    return Monitors(build, monitors, scorer_ids)
