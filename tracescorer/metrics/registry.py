""":class:`Metrics`: the registry owned by the app, every family on it, and its exposition."""

from __future__ import annotations

import platform
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Gauge, ProcessCollector, disable_created_metrics, generate_latest

from tracescorer import __version__
from tracescorer.metrics.assembly import AssemblyFamilies
from tracescorer.metrics.calibration import CalibrationFamilies
from tracescorer.metrics.config import ConfigFamilies
from tracescorer.metrics.export import ExportFamilies
from tracescorer.metrics.ingest import IngestFamilies
from tracescorer.metrics.merge import MergedView, Snapshot, take_snapshot
from tracescorer.metrics.monitors import MonitorFamilies
from tracescorer.metrics.scores import ScoreFamilies
from tracescorer.metrics.scoring import ScoringFamilies
from tracescorer.metrics.store import StoreFamilies

DEFAULT_SCORE_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


class Metrics(
    IngestFamilies,
    StoreFamilies,
    AssemblyFamilies,
    ScoringFamilies,
    ExportFamilies,
    ScoreFamilies,
    CalibrationFamilies,
    MonitorFamilies,
    ConfigFamilies,
):
    """Every metric the daemon exports; components receive this object explicitly.

    Each process of the daemon has its own; a worker sends its parent :meth:`snapshot` every few
    seconds, the parent :meth:`absorb` s it and its :meth:`render` shows the whole daemon.
    """

    def __init__(self, *, score_buckets: Sequence[float] = DEFAULT_SCORE_BUCKETS) -> None:
        # prometheus_client's own switch (process-wide, read at each scrape): counters and
        # histograms without their *_created series
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        self._children = {}
        r = self.registry
        ProcessCollector(registry=r)
        self.build_info = Gauge(
            "tracescorer_build_info",
            "1, labelled with the running version of tracescorer and of Python",
            ["version", "python"],
            registry=r,
        )
        self.build_info.labels(__version__, platform.python_version()).set(1)
        # declared in this order: the exposition lists the families as they were registered
        self._declare_ingest(r)
        self._declare_store(r)
        self._declare_assembly(r)
        self._declare_scoring(r)
        self._declare_export(r)
        self._declare_scores(r, score_buckets)
        self._declare_calibration(r)
        self._declare_monitors(r)
        self._declare_config(r)
        self._merged = MergedView(r)

    def snapshot(self) -> Snapshot:
        """This process's current ``tracescorer_*`` samples and its CPU seconds and resident
        memory, picklable, for its parent's :meth:`absorb`."""
        return take_snapshot(self.registry)

    def absorb(self, source: str, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` as the latest of the worker ``source`` (replacing its previous one)."""
        self._merged.absorb(source, snapshot)

    def retire(self, source: str, *, pid: int | None = None) -> None:
        """The worker ``source`` exited: its counters and histograms are carried on, so that no
        exposed counter goes backwards when a new process takes the name; its gauges go."""
        self._merged.retire(source, pid=pid)

    def sources(self) -> list[str]:
        """The live workers whose latest snapshots :meth:`render` adds."""
        return self._merged.sources()

    def render(self) -> bytes:
        """The ``/metrics`` exposition: per family and label set, this process's value plus the
        carried totals of retired workers plus every live worker's latest snapshot. Gauges are
        summed across processes too. ``tracescorer_worker_cpu_seconds_total`` and
        ``tracescorer_worker_resident_memory_bytes`` give each live worker's own figures;
        ``process_*`` and ``tracescorer_build_info`` are this process's."""
        return generate_latest(self._merged)
