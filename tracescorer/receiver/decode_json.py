"""OTLP/JSON request bodies to domain :class:`~tracescorer.model.Span` / :class:`~tracescorer.model.LogRecord`
(field names in lowerCamelCase or snake_case, ids in hex, 64-bit integers as strings)."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from typing import Any

import orjson

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
    EVENT_ATTRIBUTE_DEPTH,
    INT64,
    LOG_BODY_DEPTH,
    MAX_MESSAGE_DEPTH,
    RESOURCE_ATTRIBUTE_DEPTH,
    SEVERITY_NUMBERS,
    SPAN_ATTRIBUTE_DEPTH,
    SPAN_KINDS,
    STATUS_CODES,
    DecodedLogs,
    DecodedTraces,
    DecodeError,
    OutOfRange,
    enum_name,
    json_id,
    rejection,
    too_deep,
)
from tracescorer.text import fix_surrogates


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(p.title() for p in rest)


class _Obj:
    """Typed access to one JSON object of the request; type errors raise DecodeError."""

    __slots__ = ("d", "where")

    def __init__(self, d: Any, where: str) -> None:
        if not isinstance(d, dict):
            raise DecodeError(f"{where}: expected an object, got {type(d).__name__}")
        self.d = d
        self.where = where

    def raw(self, name: str) -> Any:
        value = self.d.get(_camel(name))
        return self.d.get(name) if value is None else value

    def text(self, name: str) -> str:
        value = self.raw(name)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise DecodeError(f"{self.where}.{_camel(name)}: expected a string")
        return value

    def integer(self, name: str) -> int:
        return _json_int(self.raw(name), f"{self.where}.{_camel(name)}")

    def unsigned(self, name: str, bits: int) -> int:
        """An unsigned field (fixed64, uint32, ...): out of range rejects the item."""
        value = self.integer(name)
        if not 0 <= value < (1 << bits):
            raise OutOfRange(f"{_camel(name)} {value} is out of range for uint{bits}")
        return value

    def signed(self, name: str, bits: int) -> int:
        value = self.integer(name)
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise OutOfRange(f"{_camel(name)} {value} is out of range for int{bits}")
        return value

    def enum(self, name: str, names: tuple[str, ...], prefix: str) -> int:
        value = self.raw(name)
        if isinstance(value, str) and not value.lstrip("-").isdigit():
            short = value.lower().removeprefix(prefix)
            if short in names:
                return names.index(short)
            raise DecodeError(f"{self.where}.{_camel(name)}: unknown enum value {value!r}")
        return self.signed(name, 32)

    def array(self, name: str) -> list[Any]:
        value = self.raw(name)
        if value is None:
            return []
        if not isinstance(value, list):
            raise DecodeError(f"{self.where}.{_camel(name)}: expected an array")
        return value

    def obj(self, name: str) -> _Obj:
        value = self.raw(name)
        return _Obj({} if value is None else value, f"{self.where}.{_camel(name)}")


def _json_int(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool):
        raise DecodeError(f"{where}: expected an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    if isinstance(value, dict) and set(value) <= {"low", "high", "unsigned"} and "low" in value:
        # older OpenTelemetry JS exporters wrote 64-bit values as Long objects {low, high}
        low, high = _json_int(value["low"], where), _json_int(value.get("high", 0), where)
        return ((high & 0xFFFFFFFF) << 32) | (low & 0xFFFFFFFF)
    raise DecodeError(f"{where}: expected an integer, got {value!r:.40}")


def _json_value(raw: Any, where: str, depth: int) -> Any:
    """One AnyValue at message ``depth`` (see :data:`MAX_MESSAGE_DEPTH`)."""
    if depth > MAX_MESSAGE_DEPTH:
        raise too_deep()
    v = _Obj(raw, where)
    d = v.d
    if "stringValue" in d or "string_value" in d:
        return v.text("string_value")
    if "boolValue" in d or "bool_value" in d:
        value = v.raw("bool_value")
        if not isinstance(value, bool):
            raise DecodeError(f"{where}.boolValue: expected a boolean")
        return value
    if "intValue" in d or "int_value" in d:
        value = v.integer("int_value")
        if not -INT64 <= value < INT64:
            raise OutOfRange(f"{where}.intValue {value} is out of range for int64")
        return value
    if "doubleValue" in d or "double_value" in d:
        value = v.raw("double_value")
        if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
            return float(value.replace("Infinity", "inf"))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DecodeError(f"{where}.doubleValue: expected a number")
        return float(value)
    if "bytesValue" in d or "bytes_value" in d:
        try:
            return base64.b64decode(v.text("bytes_value"), validate=True)
        except (binascii.Error, ValueError):
            raise DecodeError(f"{where}.bytesValue: invalid base64") from None
    if "arrayValue" in d or "array_value" in d:  # AnyValue > ArrayValue > AnyValue
        arr = v.obj("array_value")
        return [_json_value(x, f"{where}.arrayValue", depth + 2) for x in arr.array("values")]
    if "kvlistValue" in d or "kvlist_value" in d:  # AnyValue > KeyValueList > KeyValue > AnyValue
        return _json_attrs(v.obj("kvlist_value").array("values"), f"{where}.kvlistValue", depth + 3)
    return None


def _json_attrs(kvs: list[Any], where: str, depth: int) -> Attributes:
    """Key-value pairs whose values are AnyValues at message ``depth``."""
    out: Attributes = {}
    for kv in kvs:
        o = _Obj(kv, where)
        out[o.text("key")] = _json_value(o.raw("value") or {}, f"{where}.value", depth)
    return out


def _json_resource(rs: _Obj) -> Resource:
    r = rs.obj("resource")
    return Resource(
        attributes=_json_attrs(r.array("attributes"), "resource.attributes", RESOURCE_ATTRIBUTE_DEPTH),
        schema_url=rs.text("schema_url"),
        dropped_attributes_count=r.unsigned("dropped_attributes_count", 32),
    )


def _json_scope(ss: _Obj) -> Scope:
    s = ss.obj("scope")
    return Scope(
        name=s.text("name"),
        version=s.text("version"),
        attributes=_json_attrs(s.array("attributes"), "scope.attributes", SPAN_ATTRIBUTE_DEPTH),
        schema_url=ss.text("schema_url"),
        dropped_attributes_count=s.unsigned("dropped_attributes_count", 32),
    )


def _json_span(s: _Obj, resource: Resource, scope: Scope) -> Span:
    trace_id = json_id(s.raw("trace_id"), 16, "trace_id", required=True)
    span_id = json_id(s.raw("span_id"), 8, "span_id", required=True)
    assert trace_id is not None and span_id is not None
    links = []
    for raw in s.array("links"):
        link = _Obj(raw, "span.links")
        link_trace = json_id(link.raw("trace_id"), 16, "link trace_id", required=True)
        link_span = json_id(link.raw("span_id"), 8, "link span_id", required=True)
        assert link_trace is not None and link_span is not None
        links.append(
            SpanLink(
                trace_id=link_trace,
                span_id=link_span,
                trace_state=link.text("trace_state"),
                attributes=_json_attrs(link.array("attributes"), "link.attributes", EVENT_ATTRIBUTE_DEPTH),
                dropped_attributes_count=link.unsigned("dropped_attributes_count", 32),
                flags=link.unsigned("flags", 32),
            )
        )
    events = []
    for raw in s.array("events"):
        e = _Obj(raw, "span.events")
        events.append(
            SpanEvent(
                name=e.text("name"),
                time_unix_nano=e.unsigned("time_unix_nano", 64),
                attributes=_json_attrs(e.array("attributes"), "event.attributes", EVENT_ATTRIBUTE_DEPTH),
                dropped_attributes_count=e.unsigned("dropped_attributes_count", 32),
            )
        )
    status = s.obj("status")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=json_id(s.raw("parent_span_id"), 8, "parent_span_id", required=False),
        name=s.text("name"),
        kind=enum_name(SPAN_KINDS, s.enum("kind", SPAN_KINDS, "span_kind_")),
        start_time_unix_nano=s.unsigned("start_time_unix_nano", 64),
        end_time_unix_nano=s.unsigned("end_time_unix_nano", 64),
        status_code=enum_name(STATUS_CODES, status.enum("code", STATUS_CODES, "status_code_")),
        status_message=status.text("message"),
        attributes=_json_attrs(s.array("attributes"), "span.attributes", SPAN_ATTRIBUTE_DEPTH),
        events=tuple(events),
        links=tuple(links),
        resource=resource,
        scope=scope,
        trace_state=s.text("trace_state"),
        flags=s.unsigned("flags", 32),
        dropped_attributes_count=s.unsigned("dropped_attributes_count", 32),
        dropped_events_count=s.unsigned("dropped_events_count", 32),
        dropped_links_count=s.unsigned("dropped_links_count", 32),
    )


def _json_log(r: _Obj, resource: Resource, scope: Scope) -> LogRecord:
    body = r.raw("body")
    return LogRecord(
        time_unix_nano=r.unsigned("time_unix_nano", 64),
        observed_time_unix_nano=r.unsigned("observed_time_unix_nano", 64),
        severity_number=r.enum("severity_number", SEVERITY_NUMBERS, "severity_number_"),
        severity_text=r.text("severity_text"),
        body=None if body is None else _json_value(body, "logRecord.body", LOG_BODY_DEPTH),
        attributes=_json_attrs(r.array("attributes"), "logRecord.attributes", SPAN_ATTRIBUTE_DEPTH),
        event_name=r.text("event_name"),
        trace_id=json_id(r.raw("trace_id"), 16, "trace_id", required=False),
        span_id=json_id(r.raw("span_id"), 8, "span_id", required=False),
        flags=r.unsigned("flags", 32),
        dropped_attributes_count=r.unsigned("dropped_attributes_count", 32),
        resource=resource,
        scope=scope,
    )


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _load_json(body: bytes) -> _Obj:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if not _SURROGATE_ESCAPE.search(body):
            raise DecodeError(f"invalid JSON: {exc}") from None
        # lone surrogates: valid JSON escapes that are not text; keep the item, replace them
        try:
            data = fix_surrogates(json.loads(body))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc2:
            raise DecodeError(f"invalid JSON: {exc2}") from None
    return _Obj(data, "request")


def _walk_json(
    body: bytes,
    top: str,
    scoped: str,
    items: str,
    build: Callable[[_Obj, Resource, Scope], Any],
    accept: Callable[[Any], None],
    reject: Callable[[str], None],
) -> None:
    request = _load_json(body)
    for raw_rs in request.array(top):
        rs = _Obj(raw_rs, top)
        try:
            resource: Resource | None = _json_resource(rs)
            bad: OutOfRange | None = None
        except OutOfRange as exc:  # every item under this resource carries the bad value
            resource, bad = None, exc
        for raw_ss in rs.array(scoped):
            ss = _Obj(raw_ss, scoped)
            problem = bad
            try:
                scope = _json_scope(ss)
            except OutOfRange as exc:
                problem = problem or exc
            if resource is None or problem is not None:
                for raw in ss.array(items):
                    reject(rejection(items, _Obj(raw, items).text("name"), problem or OutOfRange("")))
                continue
            for raw in ss.array(items):
                item = _Obj(raw, items)
                try:
                    accept(build(item, resource, scope))
                except ValueError as exc:
                    if isinstance(exc, DecodeError):
                        raise
                    reject(rejection(items, item.text("name"), exc))


def decode_traces_json(body: bytes) -> DecodedTraces:
    """Decode an OTLP/JSON ``ExportTraceServiceRequest`` body."""
    out = DecodedTraces()
    _walk_json(body, "resource_spans", "scope_spans", "spans", _json_span, out.spans.append, out.reject)
    return out


def decode_logs_json(body: bytes) -> DecodedLogs:
    """Decode an OTLP/JSON ``ExportLogsServiceRequest`` body."""
    out = DecodedLogs()
    _walk_json(body, "resource_logs", "scope_logs", "log_records", _json_log, out.records.append, out.reject)
    return out
