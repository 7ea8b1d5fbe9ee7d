"""Decoded spans and log records back to OTLP protobuf requests (what an OTLP/JSON request is
appended to the segment log as). Lossless for what the decoders keep: decoding the result gives
the same :class:`~tracescorer.model.Span` / :class:`~tracescorer.model.LogRecord` values."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescorer.model import Attributes, LogRecord, Resource, Scope, Span
from tracescorer.receiver.decoded import SPAN_KINDS, STATUS_CODES


def _set_value(target: Any, value: Any) -> None:
    if value is None:
        return  # an empty AnyValue
    if isinstance(value, bool):  # before int: a bool is an int in Python
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bytes):
        target.bytes_value = value
    elif isinstance(value, dict):
        kvlist = target.kvlist_value
        kvlist.SetInParent()
        _set_attrs(kvlist.values, value)
    elif isinstance(value, list | tuple):
        array = target.array_value
        array.SetInParent()
        for item in value:
            _set_value(array.values.add(), item)
    else:
        raise TypeError(f"no OTLP AnyValue for {type(value).__name__}")


def _set_attrs(target: Any, attributes: Attributes) -> None:
    for key, value in attributes.items():
        kv = target.add()
        kv.key = key
        _set_value(kv.value, value)


def _enum(names: tuple[str, ...], name: str) -> int:
    return names.index(name) if name in names else int(name)


def _set_resource(target: Any, resource: Resource) -> None:
    _set_attrs(target.attributes, resource.attributes)
    target.dropped_attributes_count = resource.dropped_attributes_count


def _set_scope(target: Any, scope: Scope) -> None:
    target.name = scope.name
    target.version = scope.version
    _set_attrs(target.attributes, scope.attributes)
    target.dropped_attributes_count = scope.dropped_attributes_count


def _groups(items: Iterable[Span | LogRecord]) -> list[tuple[Resource, list[tuple[Scope, list[Any]]]]]:
    # the decoders share one Resource (one Scope) among the items of a ResourceSpans (ScopeSpans):
    # grouped by identity they come out as they went in
    out: dict[int, tuple[Resource, dict[int, tuple[Scope, list[Any]]]]] = {}
    for item in items:
        _, scopes = out.setdefault(id(item.resource), (item.resource, {}))
        scopes.setdefault(id(item.scope), (item.scope, []))[1].append(item)
    return [(resource, list(scopes.values())) for resource, scopes in out.values()]


def _set_span(target: Any, span: Span) -> None:
    target.trace_id = bytes.fromhex(span.trace_id)
    target.span_id = bytes.fromhex(span.span_id)
    if span.parent_span_id:
        target.parent_span_id = bytes.fromhex(span.parent_span_id)
    target.trace_state = span.trace_state
    target.flags = span.flags
    target.name = span.name
    target.kind = _enum(SPAN_KINDS, span.kind)
    target.start_time_unix_nano = span.start_time_unix_nano
    target.end_time_unix_nano = span.end_time_unix_nano
    _set_attrs(target.attributes, span.attributes)
    target.dropped_attributes_count = span.dropped_attributes_count
    for event in span.events:
        e = target.events.add()
        e.name = event.name
        e.time_unix_nano = event.time_unix_nano
        _set_attrs(e.attributes, event.attributes)
        e.dropped_attributes_count = event.dropped_attributes_count
    target.dropped_events_count = span.dropped_events_count
    for link in span.links:
        lk = target.links.add()
        lk.trace_id = bytes.fromhex(link.trace_id)
        lk.span_id = bytes.fromhex(link.span_id)
        lk.trace_state = link.trace_state
        _set_attrs(lk.attributes, link.attributes)
        lk.dropped_attributes_count = link.dropped_attributes_count
        lk.flags = link.flags
    target.dropped_links_count = span.dropped_links_count
    target.status.code = _enum(STATUS_CODES, span.status_code)
    target.status.message = span.status_message


def _set_log(target: Any, record: LogRecord) -> None:
    target.time_unix_nano = record.time_unix_nano
    target.observed_time_unix_nano = record.observed_time_unix_nano
    target.severity_number = record.severity_number
    target.severity_text = record.severity_text
    if record.body is not None:
        _set_value(target.body, record.body)
    _set_attrs(target.attributes, record.attributes)
    target.event_name = record.event_name
    if record.trace_id:
        target.trace_id = bytes.fromhex(record.trace_id)
    if record.span_id:
        target.span_id = bytes.fromhex(record.span_id)
    target.flags = record.flags
    target.dropped_attributes_count = record.dropped_attributes_count


def encode_traces(spans: Sequence[Span]) -> bytes:
    """An ``ExportTraceServiceRequest`` holding ``spans``."""
    request = ExportTraceServiceRequest()
    for resource, by_scope in _groups(spans):
        rs = request.resource_spans.add()
        _set_resource(rs.resource, resource)
        rs.schema_url = resource.schema_url
        for scope, group in by_scope:
            ss = rs.scope_spans.add()
            _set_scope(ss.scope, scope)
            ss.schema_url = scope.schema_url
            for span in group:
                _set_span(ss.spans.add(), span)
    data: bytes = request.SerializeToString()
    return data


def encode_logs(records: Sequence[LogRecord]) -> bytes:
    """An ``ExportLogsServiceRequest`` holding ``records``."""
    request = ExportLogsServiceRequest()
    for resource, by_scope in _groups(records):
        rl = request.resource_logs.add()
        _set_resource(rl.resource, resource)
        rl.schema_url = resource.schema_url
        for scope, group in by_scope:
            sl = rl.scope_logs.add()
            _set_scope(sl.scope, scope)
            sl.schema_url = scope.schema_url
            for record in group:
                _set_log(sl.log_records.add(), record)
    data: bytes = request.SerializeToString()
    return data
