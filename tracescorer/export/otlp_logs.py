"""The ``otlp_logs`` sink: the semconv ``gen_ai.evaluation.result`` event as an OTLP log record; and
the ``otlp`` sink with ``log_records: true`` (:class:`SpansAndLogRecords`): evaluation spans and the
log record of each score, to the same endpoint.

One log record per score with ``event_name = gen_ai.evaluation.result``, ``trace_id``/``span_id``
of the evaluated agent span (conversation scores: the last run's), the ``gen_ai.evaluation.*``
attributes (and ``error.type`` for scorer errors), ``time_unix_nano`` = when the score was made,
severity INFO, and the scored service's ``service.name`` as resource. For Collector-based log
pipelines: Phoenix and MLflow do not accept OTLP logs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from itertools import groupby

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs, SeverityNumber
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from tracescorer.export.evaluation import (
    EVALUATION_EVENT,
    SCOPE,
    evaluation_attributes,
    hex_id,
    key_values,
    resource_attributes,
)
from tracescorer.export.otlp import OtlpSpanSink
from tracescorer.export.otlp_transport import OtlpRequestSink, OtlpTarget
from tracescorer.export.sink import ExportResult, ItemResult
from tracescorer.records.deliveries import DueScore

__all__ = ["OtlpLogSink", "SpansAndLogRecords", "evaluation_log_record", "logs_request"]


def evaluation_log_record(score: DueScore, observed_unix_nano: int) -> LogRecord:
    record = LogRecord(
        time_unix_nano=score.version * 1000,
        observed_time_unix_nano=observed_unix_nano,
        severity_number=SeverityNumber.SEVERITY_NUMBER_INFO,
        severity_text="INFO",
        event_name=EVALUATION_EVENT,
        attributes=key_values(evaluation_attributes(score)),
    )
    trace_id, span_id = hex_id(score.trace_id, 32), hex_id(score.span_id, 16)
    if trace_id is not None:
        record.trace_id = trace_id
        record.flags = 0x01
        if span_id is not None:
            record.span_id = span_id
    return record


def logs_request(batch: Sequence[DueScore], observed_unix_nano: int | None = None) -> ExportLogsServiceRequest:
    observed = observed_unix_nano if observed_unix_nano is not None else time.time_ns()
    request = ExportLogsServiceRequest()
    keyed = sorted(batch, key=lambda s: resource_attributes(s)["service.name"])
    for _, group in groupby(keyed, key=lambda s: resource_attributes(s)["service.name"]):
        scores = list(group)
        request.resource_logs.append(
            ResourceLogs(
                resource=Resource(attributes=key_values(resource_attributes(scores[0]))),
                scope_logs=[ScopeLogs(scope=SCOPE, log_records=[evaluation_log_record(s, observed) for s in scores])],
            )
        )
    return request


class OtlpLogSink(OtlpRequestSink):
    """``gen_ai.evaluation.result`` log records over OTLP; one request per batch."""

    kind = "otlp_logs"

    def request(self, batch: Sequence[DueScore]) -> ExportLogsServiceRequest:
        return logs_request(batch)


_WORSE = {ExportResult.SUCCESS: 0, ExportResult.RETRY: 1, ExportResult.REJECTED: 2}


class SpansAndLogRecords:
    """The ``otlp`` sink with ``log_records: true``: each score as an evaluation span (its
    ``gen_ai.evaluation.*`` attributes, the span event unless ``span_events: false``) and as a
    ``gen_ai.evaluation.result`` log record carrying the evaluated span's trace and span id (the
    form the GenAI conventions now prefer), both to the sink's endpoint. A score is delivered once
    both were accepted; a retry sends both again (the span id is the same for the same version)."""

    kind = "otlp"

    def __init__(self, traces: OtlpTarget, logs: OtlpTarget, *, span_events: bool = True) -> None:
        self.target = traces
        self._spans = OtlpSpanSink(traces, span_events=span_events)
        self._logs = OtlpLogSink(logs)

    async def export(self, batch: Sequence[DueScore]) -> list[ItemResult]:
        spans = await self._spans.export(batch)
        logs = await self._logs.export(batch)
        out = []
        for s, lr in zip(spans, logs, strict=True):
            if _WORSE[lr.result] > _WORSE[s.result]:
                out.append(
                    ItemResult(result=lr.result, error=f"log records: {lr.error}", retry_after_s=lr.retry_after_s)
                )
            else:
                out.append(s)
        return out

    async def force_flush(self, timeout_s: float) -> bool:
        return True  # nothing is buffered here: the delivery table is the buffer

    async def shutdown(self) -> None:
        await self._spans.shutdown()
        await self._logs.shutdown()
