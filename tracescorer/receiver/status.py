"""OTLP response bodies shared by the receivers (the only other place that builds OTLP types)."""

from __future__ import annotations

import json

from google.protobuf.duration_pb2 import Duration
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tracescorer.receiver.ingest import IngestOutcome, Signal

INVALID_ARGUMENT = code_pb2.INVALID_ARGUMENT
RESOURCE_EXHAUSTED = code_pb2.RESOURCE_EXHAUSTED
UNAVAILABLE = code_pb2.UNAVAILABLE
UNAUTHENTICATED = code_pb2.UNAUTHENTICATED


def export_response_protobuf(signal: Signal, outcome: IngestOutcome) -> bytes:
    """An empty success response, or ``partial_success`` when items were rejected."""
    if signal is Signal.TRACES:
        resp: ExportTraceServiceResponse | ExportLogsServiceResponse = ExportTraceServiceResponse()
        if outcome.rejected:
            resp.partial_success.rejected_spans = outcome.rejected
            resp.partial_success.error_message = outcome.message
    else:
        resp = ExportLogsServiceResponse()
        if outcome.rejected:
            resp.partial_success.rejected_log_records = outcome.rejected
            resp.partial_success.error_message = outcome.message
    return bytes(resp.SerializeToString())


def export_response_json(signal: Signal, outcome: IngestOutcome) -> bytes:
    if not outcome.rejected:
        return b"{}"
    key = "rejectedSpans" if signal is Signal.TRACES else "rejectedLogRecords"
    body = {"partialSuccess": {key: str(outcome.rejected), "errorMessage": outcome.message}}
    return json.dumps(body).encode()


def status_protobuf(code: int, message: str, retry_after_s: int | None = None) -> bytes:
    """A ``google.rpc.Status``, with ``RetryInfo`` when the client should retry after a delay."""
    status = status_pb2.Status(code=code, message=message)
    if retry_after_s is not None:
        info = error_details_pb2.RetryInfo(retry_delay=Duration(seconds=retry_after_s))
        status.details.add().Pack(info)
    return bytes(status.SerializeToString())


def status_json(code: int, message: str) -> bytes:
    return json.dumps({"code": code, "message": message}).encode()


def retry_info(retry_after_s: int) -> bytes:
    return bytes(error_details_pb2.RetryInfo(retry_delay=Duration(seconds=retry_after_s)).SerializeToString())
