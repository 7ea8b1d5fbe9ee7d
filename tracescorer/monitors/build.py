"""The daemon's monitors from the settings: none without ``monitors:``, the service itself on one
daemon, or :class:`LeadingMonitors` when several daemons share the store and elect one to run them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tracescorer.clock import SYSTEM_CLOCK, Clock
from tracescorer.config.monitors import MonitorSettings
from tracescorer.metrics import Metrics
from tracescorer.monitors.leader import LeadingMonitors
from tracescorer.monitors.service import MonitorService
from tracescorer.store.api import Leadership, MonitorStore


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
) -> MonitorService | LeadingMonitors | None:
    """The ``monitors:`` configured (None without any) over the scorers ``scorer_ids``, on ``store``.
    ``shared``: other processes write scores too (several daemons, or worker processes), so the
    windows are recounted from the store every ``rebuild_s`` (``store.monitor_rebuild_s``);
    ``leadership`` (several daemons): one of them runs the monitors; ``clock`` measures their
    windows, pending periods, cooldowns, reminders and recounts."""
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
