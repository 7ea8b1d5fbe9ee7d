"""Lossless JSON for OTLP AnyValue trees.

Attribute maps are stored as plain JSON objects so SQL can read them directly
(``attributes->>'$."gen_ai.agent.name"'``). The few values JSON cannot hold are tagged with a
one-key object: bytes as ``{"$bytes": base64}``, non-finite doubles as ``{"$double": "NaN"}``,
and a kvlist that itself has a single key that looks like a tag as ``{"$kvlist": [[k, v], ...]}``.
Integers stay integers and doubles keep their decimal point, so every AnyValue round-trips.
"""

from __future__ import annotations

import base64
import math
from typing import Any

import orjson

_TAGS = frozenset({"$bytes", "$double", "$kvlist"})
_dumpb = orjson.dumps


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


def _plain(value: Any) -> bool:
    """Whether JSON holds ``value`` as it is (no tag needed anywhere inside)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is list or kind is tuple:
        return all(_plain(v) for v in value)
    if kind is dict:
        return not (len(value) == 1 and next(iter(value)) in _TAGS) and all(_plain(v) for v in value.values())
    return False


def _simple(value: dict[str, Any]) -> bool:
    # the hot path: attribute maps of strings and numbers (and lists of them), checked flat first
    for v in value.values():
        kind = type(v)
        if kind is str or kind is int or kind is bool:
            continue
        if not _plain(v):
            return False
    return not (len(value) == 1 and next(iter(value)) in _TAGS)


def dumpb(value: Any) -> bytes:
    """Encode an AnyValue tree (usually an attribute dict) as lossless JSON, UTF-8 bytes.

    Raises TypeError for values JSON cannot carry even tagged (strings with lone surrogates,
    integers beyond 64 bits).
    """
    if type(value) is dict and _simple(value):
        return _dumpb(value)
    return _dumpb(_tag(value))


def dumps(value: Any) -> str:
    """:func:`dumpb` as text."""
    return dumpb(value).decode()


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


def _tagged(value: Any) -> bool:
    """Whether a decoded tree holds a tag (most attribute maps hold none: skip the rebuild)."""
    kind = type(value)
    if kind is dict:
        if len(value) == 1 and next(iter(value)) in _TAGS:
            return True
        return any(type(v) in (dict, list) and _tagged(v) for v in value.values())
    if kind is list:
        return any(type(v) in (dict, list) and _tagged(v) for v in value)
    return False


def loads(text: str | bytes | None) -> Any:
    """Decode text written by :func:`dumps` back to the original AnyValue tree."""
    if text is None:
        return None
    value = orjson.loads(text)
    # every tag is a key starting with "$": text without one holds none (the common case)
    marker = b'"$' if isinstance(text, bytes) else '"$'
    if marker not in text:  # type: ignore[operator]
        return value
    return _untag(value) if _tagged(value) else value
