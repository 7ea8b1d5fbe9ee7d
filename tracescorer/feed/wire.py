"""Just enough of the protobuf wire format to cut an OTLP request into its groups without parsing it.

Triage (:mod:`tracescorer.feed.triage`) looks at a request's scope groups (``ScopeSpans`` /
``ScopeLogs``) as byte slices and at each item's trace id, and rebuilds a smaller request from the
slices it keeps. Field numbers are OTLP's (``opentelemetry/proto``); every other field is carried
over byte for byte. The bytes were parsed by upb when they were received, so a malformed buffer
here is a bug: :class:`WireError` says so and the caller falls back to the full decode.
"""

from __future__ import annotations

from collections.abc import Iterator

#: ExportTraceServiceRequest.resource_spans / ExportLogsServiceRequest.resource_logs
RESOURCE_GROUPS = 1
#: Resource{Spans,Logs}.resource, .scope_{spans,logs}
RESOURCE, SCOPE_GROUPS = 1, 2
#: Scope{Spans,Logs}.scope, .spans / .log_records
SCOPE, ITEMS = 1, 2
#: Span.trace_id, LogRecord.trace_id
SPAN_TRACE_ID, LOG_TRACE_ID = 1, 9
#: Resource.attributes; KeyValue.key, .value; AnyValue.string_value
ATTRIBUTES, KEY, VALUE, STRING_VALUE = 1, 1, 2, 1


class WireError(ValueError):
    """The bytes are not the protobuf message they should be."""


def varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    result = shift = 0
    while True:
        if pos >= len(data):
            raise WireError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("varint too long")


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def fields(data: bytes, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int, int, int, int]]:
    """``(field number, wire type, field start, value start, value end)`` of each field of the
    message in ``data[start:end]``; for a length-delimited field the value is its payload."""
    end = len(data) if end is None else end
    pos = start
    while pos < end:
        field_start = pos
        tag, pos = varint(data, pos)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 2:
            length, pos = varint(data, pos)
            value_start, pos = pos, pos + length
        elif wire_type == 0:
            value_start = pos
            _, pos = varint(data, pos)
        elif wire_type == 1:
            value_start, pos = pos, pos + 8
        elif wire_type == 5:
            value_start, pos = pos, pos + 4
        else:
            raise WireError(f"wire type {wire_type} (groups are not OTLP)")
        if pos > end or number == 0:
            raise WireError("field past the end of its message")
        yield number, wire_type, field_start, value_start, pos


def trace_id(data: bytes, start: int, end: int, number: int) -> bytes:
    """The trace id (field ``number``) of the item in ``data[start:end]``; empty when it has none."""
    # exporters write the trace id first: look there before walking the item's fields
    if end - start >= 18 and data[start] == (number << 3 | 2) and data[start + 1] == 16:
        return data[start + 2 : start + 18]
    for field_no, wire_type, _, value_start, value_end in fields(data, start, end):
        if field_no == number and wire_type == 2:
            return data[value_start:value_end]
    return b""


def items(data: bytes, start: int, end: int, number: int, id_field: int) -> list[tuple[int, int, bytes]]:
    """``(value start, value end, trace id)`` of each length-delimited field ``number`` of the message
    in ``data[start:end]``: the spans or log records of a scope group (trace id: field ``id_field``
    of each, empty when missing). The hot loop of triage: one-byte tags read inline."""
    out: list[tuple[int, int, bytes]] = []
    append = out.append
    item_tag = number << 3 | 2
    id_tag = id_field << 3 | 2
    pos = start
    while pos < end:
        tag = data[pos]
        if tag != item_tag:  # the scope, schema_url, or a field of a later version
            _, _, _, _, pos = next(fields(data, pos, end))
            continue
        length = data[pos + 1]
        if length < 0x80:
            value_start = pos + 2
        elif data[pos + 2] < 0x80:  # most spans: 128 bytes to 16 KiB
            length = (length & 0x7F) | data[pos + 2] << 7
            value_start = pos + 3
        else:
            length, value_start = varint(data, pos + 1)
        pos = value_start + length
        if pos > end:
            raise WireError("item past the end of its group")
        if length >= 18 and data[value_start] == id_tag and data[value_start + 1] == 16:
            append((value_start, pos, data[value_start + 2 : value_start + 18]))
        else:
            append((value_start, pos, trace_id(data, value_start, pos, id_field)))
    return out


def length_delimited(number: int, payload: bytes) -> bytes:
    """One length-delimited field: tag, length, payload."""
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload


def string_attribute(data: bytes, start: int, end: int, key: bytes) -> str | None:
    """The string value of attribute ``key`` of the Resource (or scope) in ``data[start:end]``."""
    for number, wire_type, _, kv_start, kv_end in fields(data, start, end):
        if number != ATTRIBUTES or wire_type != 2:
            continue
        found_key = found_value = None
        for kv_no, kv_type, _, v_start, v_end in fields(data, kv_start, kv_end):
            if kv_no == KEY and kv_type == 2:
                found_key = data[v_start:v_end]
            elif kv_no == VALUE and kv_type == 2:
                found_value = (v_start, v_end)
        if found_key != key or found_value is None:
            continue
        for any_no, any_type, _, s_start, s_end in fields(data, *found_value):
            if any_no == STRING_VALUE and any_type == 2:
                return data[s_start:s_end].decode("utf-8", "replace")
        return None
    return None
