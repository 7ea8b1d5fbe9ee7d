"""Export stage: stored scores out to trace backends (OTLP spans and logs, Phoenix, MLflow)."""

from tracescorer.export.evaluation import EVALUATION_EVENT, evaluation_attributes
from tracescorer.export.exporter import DeliveryResult, EvaluationExporter, ExportObserver, ExportOutcome
from tracescorer.export.mlflow import MlflowSink
from tracescorer.export.otlp import OtlpSpanSink, evaluation_span, span_request
from tracescorer.export.otlp_logs import OtlpLogSink, evaluation_log_record, logs_request
from tracescorer.export.phoenix import PhoenixSink
from tracescorer.export.sink import ExportResult, ItemResult, ScoreExporter
from tracescorer.export.sinks import NamedSink, build_sinks, sink_ids

__all__ = [
    "EVALUATION_EVENT",
    "DeliveryResult",
    "EvaluationExporter",
    "ExportObserver",
    "ExportOutcome",
    "ExportResult",
    "ItemResult",
    "MlflowSink",
    "NamedSink",
    "OtlpLogSink",
    "OtlpSpanSink",
    "PhoenixSink",
    "ScoreExporter",
    "build_sinks",
    "evaluation_attributes",
    "evaluation_log_record",
    "evaluation_span",
    "logs_request",
    "sink_ids",
    "span_request",
]
