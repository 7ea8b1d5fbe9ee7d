"""The families of calibration (:mod:`tracescorer.calibration`): other tools' evaluations
received, and the agreement of each judge version with the human labels."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from tracescorer.metrics.families import Families


class CalibrationFamilies(Families):
    """Calibration's metrics."""

    external_evaluations: Counter
    agreement_pairs: Gauge
    agreement_kappa: Gauge
    agreement_accuracy: Gauge
    agreement_mae: Gauge
    agreement_spearman: Gauge
    agreement_updated: Gauge

    def _declare_calibration(self, r: CollectorRegistry) -> None:
        # Calibration (tracescorer.calibration): other tools' evaluations in, agreement of each
        # judge version with human labels out; `version` is bounded by the versions labelled.
        self.external_evaluations = Counter(
            "tracescorer_external_evaluations",
            "Other tools' gen_ai.evaluation.result events received over OTLP, by result (stored; own = "
            "tracescorer's own exported evaluations, dropped; invalid = no gen_ai.evaluation.name, dropped)",
            ["result"],
            registry=r,
        )
        agreement = ["scorer", "version", "reference"]
        self.agreement_pairs = Gauge(
            "tracescorer_agreement_pairs",
            "Targets a judge version and its reference (human labels) both judged",
            agreement,
            registry=r,
        )
        self.agreement_kappa = Gauge(
            "tracescorer_agreement_kappa",
            "Cohen's kappa of a judge version's labels against the reference's (NaN: undefined)",
            agreement,
            registry=r,
        )
        self.agreement_accuracy = Gauge(
            "tracescorer_agreement_accuracy",
            "Share of labelled targets where a judge version and the reference agree",
            agreement,
            registry=r,
        )
        self.agreement_mae = Gauge(
            "tracescorer_agreement_mae",
            "Mean absolute error of a judge version's scores against the reference's numbers",
            agreement,
            registry=r,
        )
        self.agreement_spearman = Gauge(
            "tracescorer_agreement_spearman",
            "Spearman's rho of a judge version's scores against the reference's numbers",
            agreement,
            registry=r,
        )
        self.agreement_updated = Gauge(
            "tracescorer_agreement_last_update_timestamp_seconds",
            "When the agreement gauges were last computed from the stored labels and scores",
            registry=r,
        )
