"""Hand-built OTLP requests (protobuf and OTLP/JSON) for protocol-level tests."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

TRACE_ID = "5b8efff798038103d269b633813fc60c"
SPAN_ID = "eee19b7ec3c1b174"


def any_value(value: Any) -> AnyValue:
    v = AnyValue()
    if isinstance(value, bool):
        v.bool_value = value
    elif isinstance(value, int):
        v.int_value = value
    elif isinstance(value, float):
        v.double_value = value
    elif isinstance(value, str):
        v.string_value = value
    elif isinstance(value, bytes):
        v.bytes_value = value
    elif isinstance(value, list):
        v.array_value.values.extend(any_value(x) for x in value)
    elif isinstance(value, dict):
        v.kvlist_value.values.extend(KeyValue(key=k, value=any_value(x)) for k, x in value.items())
    return v


def trace_request(spans: list[dict[str, Any]], service: str = "proto-test") -> ExportTraceServiceRequest:
    """spans: dicts with trace_id/span_id (bytes or hex), name, attributes, parent_span_id..."""
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.append(KeyValue(key="service.name", value=any_value(service)))
    ss = rs.scope_spans.add()
    ss.scope.name = "payloads"
    for spec in spans:
        s = ss.spans.add()
        for key in ("trace_id", "span_id", "parent_span_id"):
            raw = spec.get(key, b"")
            setattr(s, key, bytes.fromhex(raw) if isinstance(raw, str) else raw)
        s.name = spec.get("name", "span")
        s.kind = spec.get("kind", 1)
        s.start_time_unix_nano = spec.get("start", 1_700_000_000_000_000_000)
        s.end_time_unix_nano = spec.get("end", 1_700_000_001_000_000_000)
        for k, v in spec.get("attributes", {}).items():
            s.attributes.append(KeyValue(key=k, value=any_value(v)))
    return req


def logs_request(records: list[dict[str, Any]]) -> ExportLogsServiceRequest:
    req = ExportLogsServiceRequest()
    rl = req.resource_logs.add()
    rl.resource.attributes.append(KeyValue(key="service.name", value=any_value("proto-test")))
    sl = rl.scope_logs.add()
    for spec in records:
        r = sl.log_records.add()
        r.time_unix_nano = spec.get("time", 1_700_000_000_000_000_000)
        r.event_name = spec.get("event_name", "")
        if "body" in spec:
            r.body.CopyFrom(any_value(spec["body"]))
        for key in ("trace_id", "span_id"):
            raw = spec.get(key, b"")
            setattr(r, key, bytes.fromhex(raw) if isinstance(raw, str) else raw)
    return req


def json_trace_body() -> bytes:
    """An OTLP/JSON request as the spec's example: hex ids, int64 strings, enum ints, camelCase."""
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "json-svc"}}]},
                    "scopeSpans": [
                        {
                            "scope": {"name": "json-scope", "version": "2.0"},
                            "spans": [
                                {
                                    "traceId": TRACE_ID.upper(),
                                    "spanId": SPAN_ID,
                                    "parentSpanId": "",
                                    "name": "invoke_agent json",
                                    "kind": 3,
                                    "startTimeUnixNano": "1544712660000000001",
                                    "endTimeUnixNano": 1544712661000000000,
                                    "status": {"code": 2, "message": "bad"},
                                    "attributes": [
                                        {"key": "s", "value": {"stringValue": "x"}},
                                        {"key": "i", "value": {"intValue": "9007199254740993"}},
                                        {"key": "i2", "value": {"intValue": 7}},
                                        {"key": "d", "value": {"doubleValue": 2.5}},
                                        {"key": "b", "value": {"boolValue": False}},
                                        {"key": "by", "value": {"bytesValue": "AAH/"}},
                                        {
                                            "key": "arr",
                                            "value": {
                                                "arrayValue": {"values": [{"intValue": "1"}, {"stringValue": "two"}]}
                                            },
                                        },
                                        {
                                            "key": "kv",
                                            "value": {
                                                "kvlistValue": {
                                                    "values": [
                                                        {
                                                            "key": "nested",
                                                            "value": {
                                                                "kvlistValue": {
                                                                    "values": [
                                                                        {"key": "deep", "value": {"boolValue": True}}
                                                                    ]
                                                                }
                                                            },
                                                        }
                                                    ]
                                                }
                                            },
                                        },
                                        {"key": "empty", "value": {}},
                                    ],
                                    "events": [{"timeUnixNano": "1544712660500000000", "name": "ev", "attributes": []}],
                                }
                            ],
                        }
                    ],
                }
            ]
        }
    ).encode()


JSON_TRACE_ATTRS = {
    "s": "x",
    "i": 9007199254740993,
    "i2": 7,
    "d": 2.5,
    "b": False,
    "by": b"\x00\x01\xff",
    "arr": [1, "two"],
    "kv": {"nested": {"deep": True}},
    "empty": None,
}
