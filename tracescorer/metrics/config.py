"""The families of configuration reloads (``tracescorer reload``, SIGHUP): how many were applied
or refused, and the hash of the configuration running now."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from tracescorer.metrics.families import Families


class ConfigFamilies(Families):
    """The reload counter and the loaded configuration's hash."""

    config_reloads: Counter
    config_info: Gauge

    def _declare_config(self, r: CollectorRegistry) -> None:
        self.config_reloads = Counter(
            "tracescorer_config_reloads",
            "Configuration reloads, by result (applied, refused: invalid, or a key that needs a restart)",
            ["result"],
            registry=r,
        )
        self.config_info = Gauge(
            "tracescorer_config_info",
            "1, labelled with the hash of the configuration running now (it changes with each applied reload)",
            ["hash"],
            registry=r,
        )

    def loaded_config(self, digest: str) -> None:
        """Show ``digest`` as the running configuration's hash (the previous one's series goes)."""
        self.config_info.clear()
        self.config_info.labels(digest).set(1)
