"""Rows as the scoring runner writes them, put into a real DuckDB store for export tests."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from support import store_ops
from support.db import fetch

from tracescorer.store.duckdb import DuckDBStore

T = TypeVar("T")

__all__ = ["delivery_states", "eventually", "exported_at", "hex_id", "insert_run", "insert_score", "rescore"]


def hex_id(nbytes: int) -> str:
    return os.urandom(nbytes).hex()


async def _write(store: DuckDBStore, sql: str, params: list[Any]) -> None:
    await store.write(store_ops.execute, sql, params)


async def insert_run(store: DuckDBStore, **values: Any) -> dict[str, Any]:
    """One ``runs`` row: an agent span 2 s long ending at ``ended_at_unix_nano``."""
    end = values.pop("ended_at_unix_nano", 1_700_000_002_000_000_000)
    row: dict[str, Any] = {
        "run_id": f"run-{hex_id(4)}",
        "trace_id": hex_id(16),
        "span_id": hex_id(8),
        "conversation_id": None,
        "agent_name": "support",
        "service_name": "support-agent",
        "convention": "genai",
        "started_at_unix_nano": end - 2_000_000_000,
        "ended_at_unix_nano": end,
        "status": "ok",
    }
    row.update(values)
    cols = list(row)
    await _write(
        store,
        f"INSERT INTO runs ({', '.join(cols)}, created_at, updated_at) "
        f"VALUES ({', '.join('?' for _ in cols)}, now(), now())",
        [row[c] for c in cols],
    )
    return row


async def insert_score(store: DuckDBStore, run: dict[str, Any] | None = None, **values: Any) -> dict[str, Any]:
    """One ``scores`` row (created_at = updated_at = now()) on ``run`` (or on random ids)."""
    row: dict[str, Any] = {
        "id": f"score-{hex_id(4)}",
        "scorer_id": "helpfulness",
        "scorer_name": "Helpfulness",
        "run_id": run["run_id"] if run else f"run-{hex_id(4)}",
        "trace_id": run["trace_id"] if run else hex_id(16),
        "span_id": run["span_id"] if run else hex_id(8),
        "conversation_id": run.get("conversation_id") if run else None,
        "entity_type": "agent",
        "entity_id": "support",
        "source": "live",
        "score": 0.75,
        "reason": "Answered every question.",
        "status": "ok",
        "error": None,
        "error_type": None,
        "label": None,
        "threshold": None,
        "judge_model": None,
        "judge_cost_usd": None,
        "duration_ms": 12.5,
    }
    row.update(values)
    cols = list(row)
    await _write(
        store,
        f"INSERT INTO scores ({', '.join(cols)}, created_at, updated_at) "
        f"VALUES ({', '.join('?' for _ in cols)}, now(), now())",
        [row[c] for c in cols],
    )
    return row


async def rescore(store: DuckDBStore, score_id: str, **values: Any) -> None:
    """What a re-score does to a row: new values, a later updated_at, exported_at cleared."""
    sets = ", ".join(f"{k} = ?" for k in values)
    await _write(
        store,
        f"UPDATE scores SET {sets}{', ' if sets else ''}updated_at = now(), exported_at = NULL WHERE id = ?",
        [*values.values(), score_id],
    )


async def delivery_states(store: DuckDBStore, sink: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """``{(score_id, sink): row}`` of ``score_deliveries``."""
    rows = await store.delivery_states(sink)
    return {(r["score_id"], r["sink"]): r for r in rows}


async def exported_at(store: DuckDBStore) -> dict[str, Any]:
    rows = await fetch(store, "SELECT id, exported_at FROM scores")
    return dict(rows)


async def eventually(
    ready: Callable[[T], bool], read: Callable[[], Awaitable[T]], timeout_s: float = 10.0, what: str = "condition"
) -> T:
    """Read until ``ready(value)`` holds (polling with a deadline); returns that value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await read()
        if ready(value):
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s:g}s for {what}; last value {value!r}")
        await asyncio.sleep(0.02)
