"""Text that can be stored: lone UTF-16 surrogates (valid JSON escapes, invalid text) replaced."""

from __future__ import annotations

from typing import Any


def fix_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too, through lists and dicts)
    replaced by U+FFFD; anything else as it is."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [fix_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {fix_surrogates(k): fix_surrogates(v) for k, v in value.items()}
    return value
