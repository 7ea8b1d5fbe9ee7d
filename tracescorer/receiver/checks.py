"""What a request must pass before it is appended to the segment log, and what is appended.

A protobuf request is parsed (upb, in C: it refuses what does not parse, nests deeper than
:data:`~tracescorer.receiver.decoded.MAX_MESSAGE_DEPTH` or holds invalid UTF-8) and its items'
ids are checked; its bytes are appended as they came, or, when some items are refused (a missing,
short or all-zero id), rewritten without them. Nothing else of a span is looked at here: the
segment log's feed decodes it later, off the acknowledgement's path. An OTLP/JSON request is
decoded whole (:mod:`tracescorer.receiver.decode_json`) and appended in its protobuf form
(:mod:`tracescorer.receiver.encode`), so every record of the log is protobuf.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError as _ProtoDecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescorer.receiver.decode_json import decode_logs_json, decode_traces_json
from tracescorer.receiver.decoded import MAX_ERRORS, DecodeError, id_hex
from tracescorer.receiver.encode import encode_logs, encode_traces

_ZERO16, _ZERO8 = bytes(16), bytes(8)


@dataclass(slots=True)
class Checked:
    """A request as it goes to the log: its ``payload`` (protobuf), the items it holds
    (``accepted``) and those refused with the first few reasons."""

    payload: bytes
    accepted: int
    rejected: int = 0
    errors: list[str] = field(default_factory=list)


def _parse(message: Any, body: bytes) -> Any:
    try:
        message.ParseFromString(body)
    except (_ProtoDecodeError, ValueError, RuntimeError) as exc:
        raise DecodeError(f"invalid protobuf: {exc}") from None
    return message


def _span_problem(s: Any) -> str | None:
    # the decoder's own id rules (the feed decodes what passes here), fast path first
    trace_id, span_id, parent = s.trace_id, s.span_id, s.parent_span_id
    if (
        len(trace_id) == 16
        and trace_id != _ZERO16
        and len(span_id) == 8
        and span_id != _ZERO8
        and len(parent) in (0, 8)
    ) and not len(s.links):
        return None
    try:
        id_hex(trace_id, 16, "trace_id", required=True)
        id_hex(span_id, 8, "span_id", required=True)
        id_hex(parent, 8, "parent_span_id", required=False)
        for link in s.links:
            id_hex(link.trace_id, 16, "link trace_id", required=True)
            id_hex(link.span_id, 8, "link span_id", required=True)
    except ValueError as exc:
        return str(exc)
    return None


def _log_problem(r: Any) -> str | None:
    try:
        id_hex(r.trace_id, 16, "trace_id", required=False)
        id_hex(r.span_id, 8, "span_id", required=False)
    except ValueError as exc:
        return str(exc)
    return None


def _check(
    request: Any, top: str, scoped: str, items: str, problem: Callable[[Any], str | None], what: str, body: bytes
) -> Checked:
    accepted = rejected = 0
    errors: list[str] = []
    for rs in getattr(request, top):
        for ss in getattr(rs, scoped):
            entries = getattr(ss, items)
            bad = []
            for i, item in enumerate(entries):
                why = problem(item)
                if why is None:
                    continue
                bad.append(i)
                if len(errors) < MAX_ERRORS:
                    errors.append(
                        f"{what} {getattr(item, 'name', '')!r}: {why}" if what == "span" else f"{what}: {why}"
                    )
            for i in reversed(bad):
                del entries[i]
            accepted += len(entries)
            rejected += len(bad)
    payload = request.SerializeToString() if rejected else body
    return Checked(payload=payload, accepted=accepted, rejected=rejected, errors=errors)


def check_traces_protobuf(body: bytes) -> Checked:
    """An ``ExportTraceServiceRequest`` body, checked (see the module docstring)."""
    request = _parse(ExportTraceServiceRequest(), body)
    return _check(request, "resource_spans", "scope_spans", "spans", _span_problem, "span", body)


def check_logs_protobuf(body: bytes) -> Checked:
    """An ``ExportLogsServiceRequest`` body, checked."""
    request = _parse(ExportLogsServiceRequest(), body)
    return _check(request, "resource_logs", "scope_logs", "log_records", _log_problem, "log record", body)


def check_traces_json(body: bytes) -> Checked:
    """An OTLP/JSON traces body: decoded, its valid spans re-encoded as protobuf."""
    decoded = decode_traces_json(body)
    return Checked(encode_traces(decoded.spans), len(decoded.spans), decoded.rejected, list(decoded.errors))


def check_logs_json(body: bytes) -> Checked:
    decoded = decode_logs_json(body)
    return Checked(encode_logs(decoded.records), len(decoded.records), decoded.rejected, list(decoded.errors))
