"""OTLP request bodies (protobuf or OTLP/JSON) to domain :class:`Span` / :class:`LogRecord`.

The only module that sees OTLP protobuf types. Invalid items (bad or missing ids) are rejected
one by one and counted, as OTLP partial success asks; an undecodable body raises
:class:`DecodeError`.
"""

from __future__ import annotations

from tracescorer.receiver.decode_json import decode_logs_json, decode_traces_json
from tracescorer.receiver.decode_pb import decode_logs_protobuf, decode_traces_protobuf
from tracescorer.receiver.decoded import (
    MAX_VALUE_DEPTH,
    DecodedLogs,
    DecodedTraces,
    DecodeError,
    OutOfRange,
    error_summary,
)

__all__ = [
    "MAX_VALUE_DEPTH",
    "DecodeError",
    "DecodedLogs",
    "DecodedTraces",
    "OutOfRange",
    "decode_logs_json",
    "decode_logs_protobuf",
    "decode_traces_json",
    "decode_traces_protobuf",
    "error_summary",
]
