"""Export stage: stored scores back out as OpenTelemetry evaluation spans."""

from tracescorer.export.otlp import (
    EVALUATION_EVENT,
    EvaluationExporter,
    ExportObserver,
    ExportOutcome,
    ScoreRow,
    build_evaluation_spans,
    build_span_exporter,
    mark_exported,
    read_pending,
)

__all__ = [
    "EVALUATION_EVENT",
    "EvaluationExporter",
    "ExportObserver",
    "ExportOutcome",
    "ScoreRow",
    "build_evaluation_spans",
    "build_span_exporter",
    "mark_exported",
    "read_pending",
]
