"""What decoding an OTLP request gives, and what both decoders share: rejections, ids, enum names."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from tracescorer.model import (
    LogRecord,
    Span,
)

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


MAX_ERRORS = 5


#: How deep messages may nest in a request (the request itself at 0), as the protobuf parser (upb)
#: allows: a protobuf request past it does not parse, and an OTLP/JSON request is refused at the
#: same point, counting its values as their protobuf form (an AnyValue holding an array is two
#: levels above its items, one holding a key-value list three). Refused whole, as undecodable.
MAX_MESSAGE_DEPTH = 100
#: Where each kind of attribute value starts (the message depth of its AnyValue).
SPAN_ATTRIBUTE_DEPTH, EVENT_ATTRIBUTE_DEPTH, RESOURCE_ATTRIBUTE_DEPTH, LOG_BODY_DEPTH = 5, 6, 4, 4
#: How many arrays deep a span attribute's value may nest (47): what the limit means in practice.
MAX_VALUE_DEPTH = (MAX_MESSAGE_DEPTH - SPAN_ATTRIBUTE_DEPTH) // 2


INT64 = 1 << 63


class DecodeError(ValueError):
    """The body is not a valid OTLP export request."""


class OutOfRange(ValueError):
    """A value does not fit its field's type: the item is rejected, the rest of the request is not."""


def too_deep() -> DecodeError:
    return DecodeError(
        f"attribute value nested deeper than protobuf allows ({MAX_MESSAGE_DEPTH} message levels; "
        f"{MAX_VALUE_DEPTH} arrays deep in a span attribute)"
    )


@dataclass(slots=True)
class Rejections:
    rejected: int = 0
    errors: list[str] = field(default_factory=list)

    def reject(self, message: str) -> None:
        """Count one invalid item; keep the first few messages for the partial-success reply."""
        self.rejected += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(message)


@dataclass(slots=True)
class DecodedTraces(Rejections):
    spans: list[Span] = field(default_factory=list)


@dataclass(slots=True)
class DecodedLogs(Rejections):
    records: list[LogRecord] = field(default_factory=list)


def error_summary(rejected: int, errors: list[str]) -> str:
    """One human-readable line for a partial-success response."""
    text = "; ".join(errors)
    if rejected > len(errors):
        text += f" (and {rejected - len(errors)} more)"
    return text


def id_hex(raw: bytes, size: int, what: str, *, required: bool) -> str | None:
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


def json_id(value: Any, size: int, what: str, *, required: bool) -> str | None:
    if value is None or value == "":
        return id_hex(b"", size, what, required=required)
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
    return id_hex(raw, size, what, required=required)


def enum_name(names: tuple[str, ...], value: int) -> str:
    return names[value] if 0 <= value < len(names) else str(value)


def rejection(items: str, name: str, exc: ValueError) -> str:
    return f"span {name!r}: {exc}" if items == "spans" else f"log record: {exc}"
