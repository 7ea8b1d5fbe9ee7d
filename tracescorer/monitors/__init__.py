"""Score monitors: window aggregates of live scores, thresholds, notifications, and score metrics.

The settings models are :mod:`tracescorer.config.monitors`. Here: ``window`` the bucketed sliding
windows, ``evaluator`` the alert state machine (pending, firing, resolved), ``policy`` which
message to send when (cooldown, reminders, the last message is the truth), ``messages``/``notify``
what is sent and how, ``persist`` storing state and events, ``service`` the daemon component,
``leader`` running it on one of several daemons, ``build`` the daemon's choice between the two,
and ``score_metrics`` the ``/metrics`` listener.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracescorer.monitors.score_metrics import ScoreMetrics
    from tracescorer.monitors.service import MonitorService

# Lazy (PEP 562): importing one module of the package (``window``, ``policy``...) must not load the
# service and its HTTP client (aiohttp, ~80 ms).
_WHERE = {
    "ScoreMetrics": "score_metrics",
    "MonitorService": "service",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"tracescorer.monitors.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'tracescorer.monitors' has no attribute {name!r}")


__all__ = ["MonitorService", "ScoreMetrics"]
