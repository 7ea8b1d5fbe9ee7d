"""Attribute values: JSON strings or structured values, tool arguments and results, ids, counts.

Values arrive as JSON strings or as structured values; :func:`loads_maybe` accepts both (JSON
through orjson; the standard library for what orjson refuses).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import orjson


def loads_maybe(value: Any) -> Any:
    """A JSON string parsed, anything else returned as is (bytes decoded as UTF-8 first).

    Strings that are not JSON come back unchanged, so callers can treat "JSON string or
    structured value or plain text" uniformly.
    """
    if type(value) is not str:
        if not isinstance(value, bytes):
            return value
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    if isinstance(value, str):
        first = value[:1]
        if value.startswith(_REPR_STARTS):
            return value  # a Python repr (single quotes where JSON has a key or value): no parser takes it
        if first in _JSON_STARTS or (first.isspace() and value.lstrip()[:1] in _JSON_STARTS) or value in _JSON_WORDS:
            try:
                return orjson.loads(value)
            except orjson.JSONDecodeError:
                try:  # what orjson refuses and json accepts: NaN, Infinity, huge integers
                    return json.loads(value)
                except ValueError:
                    return value
    return value


_JSON_STARTS = frozenset('{["')
#: Openings no JSON text has: after "[" or "{" JSON wants a value or a key, never a quote "'".
_REPR_STARTS = ("{'", "['", "[{'")
_JSON_WORDS = frozenset({"null", "true", "false"})


def parse_arguments(value: Any) -> Any:
    """Tool arguments as an object where they parse as JSON (strings are often JSON-encoded).

    None when nothing was recorded (content capture off, or an empty string): unknown
    arguments, never ``{}``, which would claim the call had none.
    """
    if value is None or (isinstance(value, (str, bytes)) and not value.strip()):
        return None
    parsed = loads_maybe(value)
    # Some emitters double-encode: '"{\"city\": \"Paris\"}"'.
    if isinstance(parsed, str) and parsed is not value:
        parsed = loads_maybe(parsed)
    return parsed


def parse_result(value: Any) -> Any:
    """A tool result: JSON objects/arrays parsed, plain strings kept as text."""
    parsed = loads_maybe(value)
    return parsed


def as_str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float, bool)):
        return str(value)
    return None


def first_str(attrs: Mapping[str, Any], *keys: str) -> str | None:
    """The first non-empty string value among ``keys``."""
    for key in keys:
        value = attrs.get(key)
        if value is None:
            continue
        if type(value) is str:
            if value:
                return value
            continue
        if isinstance(value, str) and value:
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
    return None


def first_num(attrs: Mapping[str, Any], *keys: str) -> int | float | None:
    for key in keys:
        value = attrs.get(key)
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                continue
    return None


_INDEXED = re.compile(r"^(\d+)\.(.+)$")


def indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Flattened ``prefix.N.rest`` keys grouped by N (ascending, gaps allowed) into dicts.

    ``indexed(a, "gen_ai.prompt")`` on ``gen_ai.prompt.0.role`` / ``gen_ai.prompt.2.content``
    gives ``[{"role": ...}, {"content": ...}]``: gaps in the numbering are tolerated.
    """
    dot = prefix + "."
    groups: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(dot):
            continue
        m = _INDEXED.match(key[len(dot) :])
        if m:
            groups.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return [groups[i] for i in sorted(groups)]
