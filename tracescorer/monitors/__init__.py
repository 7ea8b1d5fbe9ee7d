"""Score monitors: window aggregates of live scores, thresholds, notifications, and score metrics.

``config`` holds the settings models (imported by :mod:`tracescorer.config`), ``window`` the
bucketed sliding windows, ``evaluator`` the state machine, ``messages``/``notify`` what is sent
and how, ``service`` the daemon component and ``score_metrics`` the ``/metrics`` listener.
"""

from tracescorer.monitors.config import MonitorSettings, NotifySettings, ScoreMetricsSettings, parse_duration
from tracescorer.monitors.score_metrics import ScoreMetrics
from tracescorer.monitors.service import MonitorService

__all__ = ["MonitorService", "MonitorSettings", "NotifySettings", "ScoreMetrics", "ScoreMetricsSettings",
           "parse_duration"]
