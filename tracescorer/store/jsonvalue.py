"""Lossless JSON for OTLP AnyValue trees.

Attribute maps are stored as plain JSON objects so SQL can read them directly
(``attributes->>'$."gen_ai.agent.name"'``). The few values JSON cannot hold are tagged with a
one-key object: bytes as ``{"$bytes": base64}``, non-finite doubles as ``{"$double": "NaN"}``,
and a kvlist that itself has a single key that looks like a tag as ``{"$kvlist": [[k, v], ...]}``.
Integers stay integers and doubles keep their decimal point, so every AnyValue round-trips.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

_TAGS = frozenset({"$bytes", "$double", "$kvlist"})
_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def _tag(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        if len(value) == 1 and next(iter(value)) in _TAGS:
            return {"$kvlist": [[k, _tag(v)] for k, v in value.items()]}
        return {k: _tag(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_tag(v) for v in value]
    if kind is bytes or kind is bytearray:
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if kind is float and not math.isfinite(value):
        return {"$double": "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    return value


def _simple(value: dict[str, Any]) -> bool:
    for v in value.values():
        kind = type(v)
        if kind is dict or kind is list or kind is bytes or (kind is float and not math.isfinite(v)):
            return False
    return True


def dumps(value: Any) -> str:
    """Encode an AnyValue tree (usually an attribute dict) as lossless JSON text."""
    if type(value) is dict and _simple(value):
        return _dumps(value)
    return _dumps(_tag(value))


def _untag(value: Any) -> Any:
    if type(value) is dict:
        if len(value) == 1:
            key, inner = next(iter(value.items()))
            if key == "$bytes":
                return base64.b64decode(inner)
            if key == "$double":
                return float(inner.replace("Infinity", "inf"))
            if key == "$kvlist":
                return {k: _untag(v) for k, v in inner}
        return {k: _untag(v) for k, v in value.items()}
    if type(value) is list:
        return [_untag(v) for v in value]
    return value


def loads(text: str | None) -> Any:
    """Decode text written by :func:`dumps` back to the original AnyValue tree."""
    if text is None:
        return None
    return _untag(json.loads(text))
