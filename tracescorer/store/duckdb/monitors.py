"""Monitor state and events in DuckDB: plain functions taking a connection, and the monitors part.

Times cross this boundary as epoch seconds. ``save`` and ``prune_events`` run as writes
(``store.write``), ``load_states`` and ``rebuild`` as reads; the tables come with the schema
migrations (declared in :mod:`tracescorer.store.tables`).
"""

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
    """The windows of every monitor from the stored live scores (``coverage``: decisions): at most
    one row per (monitor, bucket) and ``max_examples`` examples per monitor, whatever the tables hold."""
    scores = [s for s in specs if not s.decisions]
    decided = [s for s in specs if s.decisions]
    rebuilt = Rebuilt([], [])
    if scores:
        rebuilt.buckets.extend(_buckets(con, scores, _SCORE_COUNTS, _MATCH, score_counts))
        rebuilt.examples.extend(_examples(con, scores, _MATCH, _EXAMPLE, _SCORE_SAMPLE, max_examples))
    if decided:
        rebuilt.buckets.extend(_buckets(con, decided, _DECISION_COUNTS, _DECIDED, decision_counts))
        rebuilt.examples.extend(_examples(con, decided, _DECIDED, _SKIPPED, _DECISION_SAMPLE, max_examples))
    return rebuilt


_SCORE_COUNTS = (
    "floor(epoch(s.updated_at) / m.width)::BIGINT AS bucket, count(*), "
    "count(*) FILTER (s.status = 'ok' AND s.score IS NOT NULL), "
    "coalesce(sum(s.score) FILTER (s.status = 'ok' AND s.score IS NOT NULL), 0), "
    "count(*) FILTER (s.label = 'pass'), count(*) FILTER (s.label = 'fail'), count(*) FILTER (s.status = 'error')"
)
_SCORE_SAMPLE = (
    "epoch(s.updated_at) AS stored_at, s.id, s.scorer_id, s.status, s.score, s.label, s.trace_id, "
    "s.conversation_id, s.run_id, s.entity_id AS agent, coalesce(s.reason, s.error) AS reason, "
    "row_number() OVER (PARTITION BY m.idx ORDER BY s.updated_at DESC, s.id) AS rn"
)
# coverage (records.monitors.Counts.add_decision): eligible and scored targets, sampled_out left out
_DECIDED = (
    "FROM scoring_decisions d JOIN m ON list_contains(m.ids, d.scorer_id) AND d.decided_at >= to_timestamp(m.since) "
    "WHERE d.source = 'live' AND d.decision <> 'sampled_out' AND d.decided_at >= to_timestamp(?::DOUBLE)"
)
_DECISION_COUNTS = (
    "floor(epoch(d.decided_at) / m.width)::BIGINT AS bucket, "
    "sum(CASE WHEN d.decision = 'filtered_out' THEN coalesce(d.sample_rate, 1) ELSE 1 END), "
    "count(*) FILTER (d.decision = 'scored')"
)
_SKIPPED = "((m.kind = 'skipped' AND d.decision <> 'scored') OR (m.kind = 'scored' AND d.decision = 'scored'))"
_DECISION_SAMPLE = (
    "epoch(d.decided_at) AS stored_at, d.id, d.scorer_id, d.decision AS status, NULL::DOUBLE AS score, NULL AS label, "
    "d.trace_id, d.conversation_id, CASE WHEN d.target_type = 'run' THEN d.target_id END AS run_id, NULL AS agent, "
    "d.detail AS reason, "
    "row_number() OVER (PARTITION BY m.idx ORDER BY d.decided_at DESC, d.id) AS rn"
)


def _buckets(
    con: Any, specs: Sequence[WindowSpec], counts: str, match: str, make: Callable[[Sequence[Any]], Counts]
) -> list[tuple[int, int, Counts]]:
    cte, params = _specs_cte(specs)
    rows = con.execute(
        f"WITH {cte} SELECT m.idx, {counts} {match} GROUP BY ALL ORDER BY 1, 2",
        [*params, min(s.since for s in specs)],
    ).fetchall()
    return [(int(r[0]), int(r[1]), make(r[2:])) for r in rows]


def _examples(
    con: Any, specs: Sequence[WindowSpec], match: str, example: str, columns: str, max_examples: int
) -> list[tuple[int, Sample]]:
    cte, params = _specs_cte(specs)
    rows = con.execute(
        f"WITH {cte}, x AS (SELECT m.idx, {columns} {match} AND {example}) "
        "SELECT * EXCLUDE (rn) FROM x WHERE rn <= ? ORDER BY idx, stored_at",
        [*params, min(s.since for s in specs), max_examples],
    ).fetchall()
    return [(int(r[0]), sample_from_row(r[1:])) for r in rows]


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
