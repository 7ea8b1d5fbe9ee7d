"""The families of the built-in monitors (:mod:`tracescorer.monitors`): state, value, samples,
last evaluation, transitions and notifications, one series per configured monitor."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from tracescorer.metrics.families import Families


class MonitorFamilies(Families):
    """The monitors' metrics."""

    monitor_state: Gauge
    monitor_value: Gauge
    monitor_samples: Gauge
    monitor_evaluated: Gauge
    monitor_transitions: Counter
    monitor_notifications: Counter

    def _declare_monitors(self, r: CollectorRegistry) -> None:
        # Built-in monitors (tracescorer.monitors): one series per configured monitor.
        self.monitor_state = Gauge(
            "tracescorer_monitor_state",
            "1 for the monitor's current state (ok, pending, firing, resolved), else 0",
            ["monitor", "state"],
            registry=r,
        )
        self.monitor_value = Gauge(
            "tracescorer_monitor_value",
            "The monitor's last aggregate over its window (NaN: no data)",
            ["monitor"],
            registry=r,
        )
        self.monitor_samples = Gauge(
            "tracescorer_monitor_samples",
            "Scores in the monitor's window that its aggregate counts (coverage: eligible targets)",
            ["monitor"],
            registry=r,
        )
        self.monitor_evaluated = Gauge(
            "tracescorer_monitor_last_evaluation_timestamp_seconds",
            "When the monitor was last evaluated",
            ["monitor"],
            registry=r,
        )
        self.monitor_transitions = Counter(
            "tracescorer_monitor_transitions",
            "Monitor state changes, by the state entered (pending, firing, resolved)",
            ["monitor", "state"],
            registry=r,
        )
        self.monitor_notifications = Counter(
            "tracescorer_monitor_notifications",
            "Notifications per target, by channel (webhook, slack) and result "
            "(sent, failed, deferred, cancelled, dropped)",
            ["monitor", "channel", "result"],
            registry=r,
        )
