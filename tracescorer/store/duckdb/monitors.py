"""Monitor state and events in DuckDB: plain functions taking a connection, and the monitors part.

Times cross this boundary as epoch seconds. ``save`` and ``prune_events`` run as writes
(``store.write``), ``load_states`` and ``rebuild`` as reads; the tables come with the schema
migrations (declared in :mod:`tracescorer.store.tables`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracescorer.records.monitors import (
    STATE_COLUMNS,
    STATE_TIMES,
    Counts,
    MonitorEvent,
    MonitorState,
    Rebuilt,
    Sample,
    WindowSpec,
    state_from_row,
    state_row,
)
from tracescorer.store.duckdb.jobs import Jobs
from tracescorer.store.duckdb.upsert import upsert

EVENT_RETENTION_DAYS = 90


_TS = "to_timestamp(?::DOUBLE)"


def prune_events(con: Any, now: float, keep_days: float = EVENT_RETENTION_DAYS) -> int:
    rows = con.execute(f"DELETE FROM monitor_events WHERE event_at < {_TS}", [now - keep_days * 86400]).fetchall()
    return int(rows[0][0]) if rows else 0


def save(con: Any, states: Sequence[MonitorState], events: Sequence[MonitorEvent]) -> None:
    """Upsert monitor states and append events (one writer job)."""
    upsert(
        con,
        "monitor_state",
        STATE_COLUMNS,
        "monitor_id",
        [state_row(s) for s in states],
        expressions=dict.fromkeys(STATE_TIMES, "to_timestamp({})"),
        stamps={"updated_at": "now()"},
    )
    if events:
        marks = "(?, " + _TS + ", ?, ?, ?, ?, ?, ?)"
        con.execute(
            "INSERT INTO monitor_events (monitor_id, event_at, event, state, value, samples, target, detail) VALUES "
            + ", ".join([marks] * len(events)),
            [v for e in events for v in (e.monitor_id, e.at, e.event, e.state, e.value, e.samples, e.target, e.detail)],
        )


_SELECT_STATE = ", ".join(f"epoch({c})" if c in STATE_TIMES else c for c in STATE_COLUMNS)


def load_states(con: Any, monitor_ids: Sequence[str]) -> list[MonitorState]:
    if not monitor_ids:
        return []
    rows = con.execute(
        f"SELECT {_SELECT_STATE} FROM monitor_state WHERE list_contains(?::VARCHAR[], monitor_id)",
        [list(monitor_ids)],
    ).fetchall()
    return [state_from_row(r) for r in rows]


def _specs_cte(specs: Sequence[WindowSpec]) -> tuple[str, list[Any]]:
    values = ", ".join(["(?::INTEGER, ?::VARCHAR[], ?::DOUBLE, ?::DOUBLE, ?::VARCHAR, ?::DOUBLE)"] * len(specs))
    params: list[Any] = [
        v for s in specs for v in (s.index, list(s.scorer_ids), s.since, s.width_s, s.example_kind, s.threshold)
    ]
    return f"m(idx, ids, since, width, kind, threshold) AS (VALUES {values})", params


_MATCH = (
    "FROM scores s JOIN m ON list_contains(m.ids, s.scorer_id) AND s.updated_at >= to_timestamp(m.since) "
    "WHERE s.source = 'live' AND s.updated_at >= to_timestamp(?::DOUBLE)"
)

_EXAMPLE = (
    "((m.kind = 'fail' AND s.label = 'fail') OR (m.kind = 'pass' AND s.label = 'pass') "
    "OR (m.kind = 'error' AND s.status = 'error') OR (m.kind = 'ok' AND s.status = 'ok') "
    "OR (m.kind = 'below' AND s.status = 'ok' AND s.score < m.threshold) "
    "OR (m.kind = 'above' AND s.status = 'ok' AND s.score > m.threshold) OR m.kind = 'any')"
)


def rebuild(con: Any, specs: Sequence[WindowSpec], max_examples: int) -> Rebuilt:
    """The windows of every monitor from the stored live scores: at most one row per (monitor,
    bucket) and ``max_examples`` examples per monitor, whatever the table holds."""
    if not specs:
        return Rebuilt([], [])
    cte, params = _specs_cte(specs)
    oldest = min(s.since for s in specs)
    rows = con.execute(
        f"WITH {cte} SELECT m.idx, floor(epoch(s.updated_at) / m.width)::BIGINT AS bucket, count(*), "
        "count(*) FILTER (s.status = 'ok' AND s.score IS NOT NULL), "
        "coalesce(sum(s.score) FILTER (s.status = 'ok' AND s.score IS NOT NULL), 0), "
        "count(*) FILTER (s.label = 'pass'), count(*) FILTER (s.label = 'fail'), count(*) FILTER (s.status = 'error') "
        f"{_MATCH} GROUP BY ALL ORDER BY 1, 2",
        [*params, oldest],
    ).fetchall()
    buckets = [
        (
            int(r[0]),
            int(r[1]),
            Counts(
                n=int(r[2]), ok=int(r[3]), score_sum=float(r[4]), passed=int(r[5]), failed=int(r[6]), errors=int(r[7])
            ),
        )
        for r in rows
    ]
    rows = con.execute(
        f"WITH {cte}, x AS (SELECT m.idx, epoch(s.updated_at) AS stored_at, s.id, s.scorer_id, s.status, s.score, s.label, "
        "s.trace_id, s.conversation_id, s.run_id, s.entity_id, coalesce(s.reason, s.error) AS reason, "
        f"row_number() OVER (PARTITION BY m.idx ORDER BY s.updated_at DESC, s.id) AS rn {_MATCH} AND {_EXAMPLE}) "
        "SELECT idx, stored_at, id, scorer_id, status, score, label, trace_id, conversation_id, run_id, entity_id, reason "
        "FROM x WHERE rn <= ? ORDER BY idx, stored_at",
        [*params, oldest, max_examples],
    ).fetchall()
    examples = [
        (
            int(r[0]),
            Sample(
                at=float(r[1]),
                score_id=r[2],
                scorer_id=r[3],
                status=r[4],
                score=r[5],
                label=r[6],
                trace_id=r[7],
                conversation_id=r[8],
                run_id=r[9],
                agent=r[10],
                reason=r[11],
            ),
        )
        for r in rows
    ]
    return Rebuilt(buckets, examples)


class MonitorsPart(Jobs):
    """:class:`~tracescorer.store.api.MonitorStore` on the store process."""

    async def monitor_states(self, monitor_ids: Sequence[str]) -> list[MonitorState]:
        return await self.read(load_states, list(monitor_ids))

    async def save_monitors(self, states: Sequence[MonitorState], events: Sequence[MonitorEvent]) -> None:
        await self.write(save, list(states), list(events))

    async def prune_monitor_events(self, now: float) -> int:
        return await self.write(prune_events, now)

    async def rebuild_monitor_windows(self, specs: Sequence[WindowSpec], max_examples: int) -> Rebuilt:
        return await self.read(rebuild, list(specs), max_examples)
