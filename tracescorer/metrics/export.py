"""The families of export (evaluation spans sent, deliveries per sink); the exporter reports to
them as its observer."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from tracescorer.metrics.families import Families


class ExportFamilies(Families):
    """Export's metrics; the exporter's observer."""

    exports: Counter
    deliveries: Counter

    def _declare_export(self, r: CollectorRegistry) -> None:
        self.exports = Counter(
            "tracescorer_export_spans",
            "Evaluation spans sent, by result (exported, failed)",
            ["result"],
            registry=r,
        )
        self.deliveries = Counter(
            "tracescorer_export_deliveries",
            "Score deliveries per sink, by result (delivered, retry, rejected, failed = given up)",
            ["sink", "result"],
            registry=r,
        )

    # ExportObserver (tracescorer.export.exporter)
    def on_export(self, outcome: object, count: int, seconds: float) -> None:
        self.exports.labels(str(getattr(outcome, "value", outcome))).inc(count)

    def on_delivery(self, sink: str, result: str, count: int) -> None:
        self.deliveries.labels(sink, result).inc(count)
