"""Monitor state and events in PostgreSQL (the DuckDB forms: :mod:`tracescorer.store.duckdb.monitors`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    decision_counts,
    sample_from_row,
    score_counts,
    state_from_row,
    state_row,
)
from tracescorer.store.duckdb.monitors import EVENT_RETENTION_DAYS
from tracescorer.store.postgres.bulk import upsert_params
from tracescorer.store.postgres.tx import Tx

Conn = Any

_CASTS = {"value": "float8", "samples": "int8", "firing_notified": "bool", "reminders": "int8"}


def _array(column: str) -> str:
    return "%s::" + ("float8" if column in STATE_TIMES else _CASTS.get(column, "text")) + "[]"


def _stored(column: str) -> str:
    return f"to_timestamp(b.{column})" if column in STATE_TIMES else f"b.{column}"


_NAMES = ", ".join(STATE_COLUMNS)
_SAVE_SQL = (
    f"INSERT INTO monitor_state AS m ({_NAMES}, updated_at) "
    f"SELECT {', '.join(_stored(c) for c in STATE_COLUMNS)}, now() "
    f"FROM unnest({', '.join(_array(c) for c in STATE_COLUMNS)}) AS b({_NAMES}) "
    "ON CONFLICT (monitor_id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in STATE_COLUMNS if c != "monitor_id")
    + ", updated_at = now()"
)


async def prune_events(conn: Conn, now: float, keep_days: float = EVENT_RETENTION_DAYS) -> int:
    cur = await conn.execute("DELETE FROM monitor_events WHERE event_at < to_timestamp(%s)", [now - keep_days * 86400])
    return int(cur.rowcount)


async def save(conn: Conn, states: Sequence[MonitorState], events: Sequence[MonitorEvent]) -> None:
    if states:
        rows = [state_row(s) for s in states]
        await conn.execute(_SAVE_SQL, upsert_params(STATE_COLUMNS, "monitor_id", rows))
    if events:
        cols = [
            [e.monitor_id for e in events],
            [e.at for e in events],
            [e.event for e in events],
            [e.state for e in events],
            [e.value for e in events],
            [e.samples for e in events],
            [e.target for e in events],
            [e.detail for e in events],
        ]
        await conn.execute(
            "INSERT INTO monitor_events (monitor_id, event_at, event, state, value, samples, target, detail) "
            "SELECT m, to_timestamp(a), e, s, v, n, t, d FROM unnest(%s::text[], %s::float8[], %s::text[], %s::text[], "
            "%s::float8[], %s::int8[], %s::text[], %s::text[]) AS x(m, a, e, s, v, n, t, d)",
            cols,
        )


def _epoch(column: str) -> str:
    return f"EXTRACT(EPOCH FROM {column})::float8"


async def load_states(conn: Conn, monitor_ids: Sequence[str]) -> list[MonitorState]:
    if not monitor_ids:
        return []
    columns = ", ".join(_epoch(c) if c in STATE_TIMES else c for c in STATE_COLUMNS)
    cur = await conn.execute(
        f"SELECT {columns} FROM monitor_state WHERE monitor_id = ANY(%s::text[])", [list(monitor_ids)]
    )
    return [state_from_row(r) for r in await cur.fetchall()]


def _specs_cte(specs: Sequence[WindowSpec]) -> tuple[str, list[Any]]:
    pairs = [(s.index, scorer) for s in specs for scorer in s.scorer_ids]
    params: list[Any] = [
        [s.index for s in specs],
        [s.since for s in specs],
        [s.width_s for s in specs],
        [s.example_kind for s in specs],
        [s.threshold for s in specs],
        [p[0] for p in pairs],
        [p[1] for p in pairs],
    ]
    return (
        "m AS (SELECT * FROM unnest(%s::int4[], %s::float8[], %s::float8[], %s::text[], %s::float8[]) "
        "AS u(idx, since, width, kind, threshold)), "
        "mi AS (SELECT * FROM unnest(%s::int4[], %s::text[]) AS p(idx, scorer_id))"
    ), params


_MATCH = (
    "FROM scores s JOIN mi ON mi.scorer_id = s.scorer_id JOIN m ON m.idx = mi.idx "
    "AND s.updated_at >= to_timestamp(m.since) WHERE s.source = 'live' AND s.updated_at >= to_timestamp(%s)"
)
_EXAMPLE = (
    "((m.kind = 'fail' AND s.label = 'fail') OR (m.kind = 'pass' AND s.label = 'pass') "
    "OR (m.kind = 'error' AND s.status = 'error') OR (m.kind = 'ok' AND s.status = 'ok') "
    "OR (m.kind = 'below' AND s.status = 'ok' AND s.score < m.threshold) "
    "OR (m.kind = 'above' AND s.status = 'ok' AND s.score > m.threshold) OR m.kind = 'any')"
)
_OK = "s.status = 'ok' AND s.score IS NOT NULL"


async def rebuild(conn: Conn, specs: Sequence[WindowSpec], max_examples: int) -> Rebuilt:
    """Every monitor's window from the stored live scores (``coverage``: decisions) of all daemons,
    bounded like the DuckDB form."""
    scores = [s for s in specs if not s.decisions]
    decided = [s for s in specs if s.decisions]
    rebuilt = Rebuilt([], [])
    if scores:
        rebuilt.buckets.extend(await _buckets(conn, scores, _SCORE_COUNTS, _MATCH, score_counts))
        rebuilt.examples.extend(await _examples(conn, scores, _MATCH, _EXAMPLE, _SCORE_SAMPLE, max_examples))
    if decided:
        rebuilt.buckets.extend(await _buckets(conn, decided, _DECISION_COUNTS, _DECIDED, decision_counts))
        rebuilt.examples.extend(await _examples(conn, decided, _DECIDED, _SKIPPED, _DECISION_SAMPLE, max_examples))
    return rebuilt


_SCORE_COUNTS = (
    f"floor({_epoch('s.updated_at')} / m.width)::int8 AS bucket, count(*), "
    f"count(*) FILTER (WHERE {_OK}), coalesce(sum(s.score) FILTER (WHERE {_OK}), 0), "
    "count(*) FILTER (WHERE s.label = 'pass'), count(*) FILTER (WHERE s.label = 'fail'), "
    "count(*) FILTER (WHERE s.status = 'error')"
)
_SCORE_SAMPLE = (
    f"{_epoch('s.updated_at')} AS stored_at, s.id, s.scorer_id, s.status, s.score, s.label, s.trace_id, "
    "s.conversation_id, s.run_id, s.entity_id AS agent, coalesce(s.reason, s.error) AS reason, "
    "row_number() OVER (PARTITION BY m.idx ORDER BY s.updated_at DESC, s.id) AS rn"
)
# coverage (records.monitors.Counts.add_decision): eligible and scored targets, sampled_out left out
_DECIDED = (
    "FROM scoring_decisions d JOIN mi ON mi.scorer_id = d.scorer_id JOIN m ON m.idx = mi.idx "
    "AND d.decided_at >= to_timestamp(m.since) WHERE d.source = 'live' AND d.decision <> 'sampled_out' "
    "AND d.decided_at >= to_timestamp(%s)"
)
_DECISION_COUNTS = (
    f"floor({_epoch('d.decided_at')} / m.width)::int8 AS bucket, "
    "sum(CASE WHEN d.decision = 'filtered_out' THEN coalesce(d.sample_rate, 1) ELSE 1 END), "
    "count(*) FILTER (WHERE d.decision = 'scored')"
)
_SKIPPED = "((m.kind = 'skipped' AND d.decision <> 'scored') OR (m.kind = 'scored' AND d.decision = 'scored'))"
_DECISION_SAMPLE = (
    f"{_epoch('d.decided_at')} AS stored_at, d.id, d.scorer_id, d.decision AS status, NULL::float8 AS score, "
    "NULL::text AS label, d.trace_id, d.conversation_id, CASE WHEN d.target_type = 'run' THEN d.target_id END "
    "AS run_id, NULL::text AS agent, d.detail AS reason, "
    "row_number() OVER (PARTITION BY m.idx ORDER BY d.decided_at DESC, d.id) AS rn"
)
_SAMPLE_NAMES = "stored_at, id, scorer_id, status, score, label, trace_id, conversation_id, run_id, agent, reason"


async def _buckets(
    conn: Conn, specs: Sequence[WindowSpec], counts: str, match: str, make: Callable[[Sequence[Any]], Counts]
) -> list[tuple[int, int, Counts]]:
    cte, params = _specs_cte(specs)
    cur = await conn.execute(
        f"WITH {cte} SELECT m.idx, {counts} {match} GROUP BY 1, 2 ORDER BY 1, 2",
        [*params, min(s.since for s in specs)],
    )
    return [(int(r[0]), int(r[1]), make(r[2:])) for r in await cur.fetchall()]


async def _examples(
    conn: Conn, specs: Sequence[WindowSpec], match: str, example: str, columns: str, max_examples: int
) -> list[tuple[int, Sample]]:
    cte, params = _specs_cte(specs)
    cur = await conn.execute(
        f"WITH {cte}, x AS (SELECT m.idx, {columns} {match} AND {example}) "
        f"SELECT idx, {_SAMPLE_NAMES} FROM x WHERE rn <= %s ORDER BY idx, stored_at",
        [*params, min(s.since for s in specs), max_examples],
    )
    return [(int(r[0]), sample_from_row(r[1:])) for r in await cur.fetchall()]


class MonitorsPart(Tx):
    """:class:`~tracescorer.store.api.MonitorStore` in PostgreSQL."""

    async def monitor_states(self, monitor_ids: Sequence[str]) -> list[MonitorState]:
        return await self._tx(load_states, list(monitor_ids), write=False)

    async def save_monitors(self, states: Sequence[MonitorState], events: Sequence[MonitorEvent]) -> None:
        await self._tx(save, list(states), list(events))

    async def prune_monitor_events(self, now: float) -> int:
        return await self._tx(prune_events, now)

    async def rebuild_monitor_windows(self, specs: Sequence[WindowSpec], max_examples: int) -> Rebuilt:
        return await self._tx(rebuild, list(specs), max_examples, write=False)
