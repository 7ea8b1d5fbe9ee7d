"""Reading what a running store holds, from tests (through the store's read-only query path)."""

from __future__ import annotations

from typing import Any

from tracescorer.store.api import QueryStore


async def fetch(store: QueryStore, sql: str, *params: Any, max_rows: int = 100_000) -> list[tuple[Any, ...]]:
    """Rows of one read-only statement."""
    return (await store.query(sql, max_rows=max_rows, timeout_s=60, params=params)).rows


async def scalar(store: QueryStore, sql: str, *params: Any) -> Any:
    rows = await fetch(store, sql, *params)
    return rows[0][0] if rows else None
