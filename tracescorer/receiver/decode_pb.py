"""OTLP protobuf request bodies to domain :class:`~tracescorer.model.Span` / :class:`~tracescorer.model.LogRecord`
(the only place that reads OTLP protobuf types on the way in)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from google.protobuf.message import DecodeError as _ProtoDecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescorer.model import (
    Attributes,
    LogRecord,
    Resource,
    Scope,
    Span,
    SpanEvent,
    SpanLink,
)
from tracescorer.receiver.decoded import (
    SPAN_KINDS,
    STATUS_CODES,
    DecodedLogs,
    DecodedTraces,
    DecodeError,
    enum_name,
    id_hex,
    rejection,
)

_SCALARS = frozenset({"string_value", "int_value", "bool_value", "double_value"})


def _pb_value(v: Any) -> Any:
    # as deep as the parser allowed (MAX_MESSAGE_DEPTH): the recursion is bounded by it
    kind = v.WhichOneof("value")
    if kind in _SCALARS:
        return getattr(v, kind)
    if kind == "array_value":
        return [_pb_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _pb_value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return bytes(v.bytes_value)
    return None


def _pb_attrs(kvs: Iterable[Any]) -> Attributes:
    out: Attributes = {}
    for kv in kvs:  # the hot loop of ingest: scalars inline, nested values recurse
        v = kv.value
        kind = v.WhichOneof("value")
        out[kv.key] = getattr(v, kind) if kind in _SCALARS else _pb_value(v)
    return out


def _pb_resource(r: Any, schema_url: str) -> Resource:
    return Resource(
        attributes=_pb_attrs(r.attributes),
        schema_url=schema_url,
        dropped_attributes_count=r.dropped_attributes_count,
    )


def _pb_scope(s: Any, schema_url: str) -> Scope:
    return Scope(
        name=s.name,
        version=s.version,
        attributes=_pb_attrs(s.attributes),
        schema_url=schema_url,
        dropped_attributes_count=s.dropped_attributes_count,
    )


def _pb_span(s: Any, resource: Resource, scope: Scope) -> Span:
    trace_id = id_hex(s.trace_id, 16, "trace_id", required=True)
    span_id = id_hex(s.span_id, 8, "span_id", required=True)
    assert trace_id is not None and span_id is not None  # required=True guarantees it
    status = s.status
    links = []
    for link in s.links if len(s.links) else ():
        link_trace = id_hex(link.trace_id, 16, "link trace_id", required=True)
        link_span = id_hex(link.span_id, 8, "link span_id", required=True)
        assert link_trace is not None and link_span is not None
        links.append(
            SpanLink(
                trace_id=link_trace,
                span_id=link_span,
                trace_state=link.trace_state,
                attributes=_pb_attrs(link.attributes),
                dropped_attributes_count=link.dropped_attributes_count,
                flags=link.flags,
            )
        )
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=id_hex(s.parent_span_id, 8, "parent_span_id", required=False),
        name=s.name,
        kind=enum_name(SPAN_KINDS, s.kind),
        start_time_unix_nano=s.start_time_unix_nano,
        end_time_unix_nano=s.end_time_unix_nano,
        status_code=enum_name(STATUS_CODES, status.code),
        status_message=status.message,
        attributes=_pb_attrs(s.attributes),
        events=tuple(
            SpanEvent(
                name=e.name,
                time_unix_nano=e.time_unix_nano,
                attributes=_pb_attrs(e.attributes),
                dropped_attributes_count=e.dropped_attributes_count,
            )
            for e in s.events
        )
        if len(s.events)
        else (),
        links=tuple(links),
        resource=resource,
        scope=scope,
        trace_state=s.trace_state,
        flags=s.flags,
        dropped_attributes_count=s.dropped_attributes_count,
        dropped_events_count=s.dropped_events_count,
        dropped_links_count=s.dropped_links_count,
    )


def _pb_log(r: Any, resource: Resource, scope: Scope) -> LogRecord:
    return LogRecord(
        time_unix_nano=r.time_unix_nano,
        observed_time_unix_nano=r.observed_time_unix_nano,
        severity_number=r.severity_number,
        severity_text=r.severity_text,
        body=_pb_value(r.body) if r.HasField("body") else None,
        attributes=_pb_attrs(r.attributes),
        event_name=r.event_name,
        trace_id=id_hex(r.trace_id, 16, "trace_id", required=False),
        span_id=id_hex(r.span_id, 8, "span_id", required=False),
        flags=r.flags,
        dropped_attributes_count=r.dropped_attributes_count,
        resource=resource,
        scope=scope,
    )


def _parse(message: Any, body: bytes) -> None:
    try:
        message.ParseFromString(body)
    except (_ProtoDecodeError, ValueError, RuntimeError) as exc:
        raise DecodeError(f"invalid protobuf: {exc}") from None


def _walk_pb(
    request: Any,
    top: str,
    scoped: str,
    items: str,
    build: Callable[[Any, Resource, Scope], Any],
    accept: Callable[[Any], None],
    reject: Callable[[str], None],
) -> None:
    for rs in getattr(request, top):
        resource = _pb_resource(rs.resource, rs.schema_url)
        for ss in getattr(rs, scoped):
            scope = _pb_scope(ss.scope, ss.schema_url)
            for item in getattr(ss, items):
                try:
                    accept(build(item, resource, scope))
                except ValueError as exc:
                    if isinstance(exc, DecodeError):
                        raise  # the request as a whole is refused (nesting beyond the limit)
                    reject(rejection(items, getattr(item, "name", ""), exc))


def decode_traces_protobuf(body: bytes) -> DecodedTraces:
    """Decode an ``ExportTraceServiceRequest`` body."""
    request = ExportTraceServiceRequest()
    _parse(request, body)
    out = DecodedTraces()
    _walk_pb(request, "resource_spans", "scope_spans", "spans", _pb_span, out.spans.append, out.reject)
    return out


def decode_logs_protobuf(body: bytes) -> DecodedLogs:
    """Decode an ``ExportLogsServiceRequest`` body."""
    request = ExportLogsServiceRequest()
    _parse(request, body)
    out = DecodedLogs()
    _walk_pb(request, "resource_logs", "scope_logs", "log_records", _pb_log, out.records.append, out.reject)
    return out
