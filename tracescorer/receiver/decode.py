"""OTLP request bodies (protobuf or OTLP/JSON) to domain :class:`Span` / :class:`LogRecord`.

The only module that sees OTLP protobuf types. Invalid items (bad or missing ids) are rejected
one by one and counted, as OTLP partial success asks; an undecodable body raises
:class:`DecodeError`.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
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
from tracescorer.text import fix_surrogates

SPAN_KINDS = ("unspecified", "internal", "server", "client", "producer", "consumer")
STATUS_CODES = ("unset", "ok", "error")
SEVERITY_NUMBERS = (
    "unspecified",
    "trace",
    "trace2",
    "trace3",
    "trace4",
    "debug",
    "debug2",
    "debug3",
    "debug4",
    "info",
    "info2",
    "info3",
    "info4",
    "warn",
    "warn2",
    "warn3",
    "warn4",
    "error",
    "error2",
    "error3",
    "error4",
    "fatal",
    "fatal2",
    "fatal3",
    "fatal4",
)
_MAX_ERRORS = 5
#: Deepest nesting of array/kvlist attribute values accepted, the same for protobuf and JSON
#: (deeper requests are refused whole, as undecodable).
MAX_VALUE_DEPTH = 32
_INT64 = 1 << 63


class DecodeError(ValueError):
    """The body is not a valid OTLP export request."""


class OutOfRange(ValueError):
    """A value does not fit its field's type: the item is rejected, the rest of the request is not."""


def _too_deep() -> DecodeError:
    return DecodeError(f"attribute value nested deeper than {MAX_VALUE_DEPTH} levels")


@dataclass(slots=True)
class _Rejections:
    rejected: int = 0
    errors: list[str] = field(default_factory=list)

    def reject(self, message: str) -> None:
        """Count one invalid item; keep the first few messages for the partial-success reply."""
        self.rejected += 1
        if len(self.errors) < _MAX_ERRORS:
            self.errors.append(message)


@dataclass(slots=True)
class DecodedTraces(_Rejections):
    spans: list[Span] = field(default_factory=list)


@dataclass(slots=True)
class DecodedLogs(_Rejections):
    records: list[LogRecord] = field(default_factory=list)


def error_summary(rejected: int, errors: list[str]) -> str:
    """One human-readable line for a partial-success response."""
    text = "; ".join(errors)
    if rejected > len(errors):
        text += f" (and {rejected - len(errors)} more)"
    return text


# --- ids ----------------------------------------------------------------------------------------


def _id_hex(raw: bytes, size: int, what: str, *, required: bool) -> str | None:
    """Validate an id of ``size`` bytes; ``None`` when empty and optional; ValueError otherwise."""
    if not raw:
        if required:
            raise ValueError(f"missing {what}")
        return None
    if len(raw) != size:
        raise ValueError(f"{what} must be {size} bytes, got {len(raw)}")
    if raw == bytes(size):
        if required:
            raise ValueError(f"{what} is all zeros")
        return None
    return raw.hex()


def _json_id(value: Any, size: int, what: str, *, required: bool) -> str | None:
    if value is None or value == "":
        return _id_hex(b"", size, what, required=required)
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a hex string")
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        # Some emitters send base64 ids in JSON (protobuf's generic mapping); accept when unambiguous.
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{what} is not hex: {value[:40]!r}") from None
    return _id_hex(raw, size, what, required=required)


# --- protobuf ------------------------------------------------------------------------------------


_SCALARS = frozenset({"string_value", "int_value", "bool_value", "double_value"})


def _pb_value(v: Any, depth: int = 1) -> Any:
    kind = v.WhichOneof("value")
    if kind in _SCALARS:
        return getattr(v, kind)
    if depth > MAX_VALUE_DEPTH:
        raise _too_deep()
    if kind == "array_value":
        return [_pb_value(x, depth + 1) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _pb_value(kv.value, depth + 1) for kv in v.kvlist_value.values}
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


def _enum_name(names: tuple[str, ...], value: int) -> str:
    return names[value] if 0 <= value < len(names) else str(value)


def _pb_span(s: Any, resource: Resource, scope: Scope) -> Span:
    trace_id = _id_hex(s.trace_id, 16, "trace_id", required=True)
    span_id = _id_hex(s.span_id, 8, "span_id", required=True)
    assert trace_id is not None and span_id is not None  # required=True guarantees it
    status = s.status
    links = []
    for link in s.links if len(s.links) else ():
        link_trace = _id_hex(link.trace_id, 16, "link trace_id", required=True)
        link_span = _id_hex(link.span_id, 8, "link span_id", required=True)
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
        parent_span_id=_id_hex(s.parent_span_id, 8, "parent_span_id", required=False),
        name=s.name,
        kind=_enum_name(SPAN_KINDS, s.kind),
        start_time_unix_nano=s.start_time_unix_nano,
        end_time_unix_nano=s.end_time_unix_nano,
        status_code=_enum_name(STATUS_CODES, status.code),
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
        trace_id=_id_hex(r.trace_id, 16, "trace_id", required=False),
        span_id=_id_hex(r.span_id, 8, "span_id", required=False),
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


def _rejection(items: str, name: str, exc: ValueError) -> str:
    return f"span {name!r}: {exc}" if items == "spans" else f"log record: {exc}"


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
                    reject(_rejection(items, getattr(item, "name", ""), exc))


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


# --- OTLP/JSON -------------------------------------------------------------------------------------
# The OTLP JSON mapping: lowerCamelCase keys (the original snake_case names are accepted too, as
# protobuf's JSON parsers do), hex trace/span ids, 64-bit integers as strings or numbers, enums as
# integers (names accepted), bytes values base64.


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


def _json_value(raw: Any, where: str, depth: int = 1) -> Any:
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
        if not -_INT64 <= value < _INT64:
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
    if "arrayValue" in d or "array_value" in d:
        if depth > MAX_VALUE_DEPTH:
            raise _too_deep()
        arr = v.obj("array_value")
        return [_json_value(x, f"{where}.arrayValue", depth + 1) for x in arr.array("values")]
    if "kvlistValue" in d or "kvlist_value" in d:
        if depth > MAX_VALUE_DEPTH:
            raise _too_deep()
        return _json_attrs(v.obj("kvlist_value").array("values"), f"{where}.kvlistValue", depth + 1)
    return None


def _json_attrs(kvs: list[Any], where: str, depth: int = 1) -> Attributes:
    out: Attributes = {}
    for kv in kvs:
        o = _Obj(kv, where)
        out[o.text("key")] = _json_value(o.raw("value") or {}, f"{where}.value", depth)
    return out


def _json_resource(rs: _Obj) -> Resource:
    r = rs.obj("resource")
    return Resource(
        attributes=_json_attrs(r.array("attributes"), "resource.attributes"),
        schema_url=rs.text("schema_url"),
        dropped_attributes_count=r.unsigned("dropped_attributes_count", 32),
    )


def _json_scope(ss: _Obj) -> Scope:
    s = ss.obj("scope")
    return Scope(
        name=s.text("name"),
        version=s.text("version"),
        attributes=_json_attrs(s.array("attributes"), "scope.attributes"),
        schema_url=ss.text("schema_url"),
        dropped_attributes_count=s.unsigned("dropped_attributes_count", 32),
    )


def _json_span(s: _Obj, resource: Resource, scope: Scope) -> Span:
    trace_id = _json_id(s.raw("trace_id"), 16, "trace_id", required=True)
    span_id = _json_id(s.raw("span_id"), 8, "span_id", required=True)
    assert trace_id is not None and span_id is not None
    links = []
    for raw in s.array("links"):
        link = _Obj(raw, "span.links")
        link_trace = _json_id(link.raw("trace_id"), 16, "link trace_id", required=True)
        link_span = _json_id(link.raw("span_id"), 8, "link span_id", required=True)
        assert link_trace is not None and link_span is not None
        links.append(
            SpanLink(
                trace_id=link_trace,
                span_id=link_span,
                trace_state=link.text("trace_state"),
                attributes=_json_attrs(link.array("attributes"), "link.attributes"),
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
                attributes=_json_attrs(e.array("attributes"), "event.attributes"),
                dropped_attributes_count=e.unsigned("dropped_attributes_count", 32),
            )
        )
    status = s.obj("status")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=_json_id(s.raw("parent_span_id"), 8, "parent_span_id", required=False),
        name=s.text("name"),
        kind=_enum_name(SPAN_KINDS, s.enum("kind", SPAN_KINDS, "span_kind_")),
        start_time_unix_nano=s.unsigned("start_time_unix_nano", 64),
        end_time_unix_nano=s.unsigned("end_time_unix_nano", 64),
        status_code=_enum_name(STATUS_CODES, status.enum("code", STATUS_CODES, "status_code_")),
        status_message=status.text("message"),
        attributes=_json_attrs(s.array("attributes"), "span.attributes"),
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
        body=None if body is None else _json_value(body, "logRecord.body"),
        attributes=_json_attrs(r.array("attributes"), "logRecord.attributes"),
        event_name=r.text("event_name"),
        trace_id=_json_id(r.raw("trace_id"), 16, "trace_id", required=False),
        span_id=_json_id(r.raw("span_id"), 8, "span_id", required=False),
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
                    reject(_rejection(items, _Obj(raw, items).text("name"), problem or OutOfRange("")))
                continue
            for raw in ss.array(items):
                item = _Obj(raw, items)
                try:
                    accept(build(item, resource, scope))
                except ValueError as exc:
                    if isinstance(exc, DecodeError):
                        raise
                    reject(_rejection(items, item.text("name"), exc))


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
