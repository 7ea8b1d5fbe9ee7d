"""What every group of metric families shares: the registry they are declared on and the kept
labelled children (:meth:`Families.child`)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry


class Families:
    """Base of the family groups :class:`tracescorer.metrics.Metrics` is made of."""

    registry: CollectorRegistry
    _children: dict[tuple[int, tuple[str, ...]], Any]

    def child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, kept: the hot paths count per trace and per score, and a
        lookup through ``labels()`` costs three times the increment. Label values are bounded
        (binding ids, statuses, conventions, agents up to ``max_agents``)."""
        key = (id(metric), values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found
