"""Sizes as DuckDB's settings and the configuration write them."""

from __future__ import annotations

_UNITS = {
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KIB": 1024,
    "MIB": 1024**2,
    "GIB": 1024**3,
    "TIB": 1024**4,
}


def size_bytes(text: str) -> int:
    """``64MB`` / ``1GiB`` / ``512 KB`` in bytes (the forms DuckDB's settings take)."""
    number = text.strip().rstrip("BbIiKkMmGgTt ")
    unit = text.strip()[len(number) :].strip().upper() or "B"
    return int(float(number) * _UNITS[unit])
