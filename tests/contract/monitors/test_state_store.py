"""Monitor state in both store engines: every field round-trips (so a restart or a new leader starts
from exactly what was stored), and a database from before the pending period (DuckDB version 6,
PostgreSQL version 1) is upgraded with its rows read the way they were meant: a firing that was
notified stays told, one the old cooldown hid is told once the cooldown ended."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import duckdb
import psycopg
import pytest

from tracescorer.config.monitors import MonitorSettings
from tracescorer.monitors.policy import Notice, decide
from tracescorer.records.monitors import MonitorEvent, MonitorState
from tracescorer.store import tables
from tracescorer.store.duckdb import DuckDBStore
from tracescorer.store.postgres.store import PostgresResultStore

NOW = float(int(time.time()))

FULL = MonitorState(
    monitor_id="full",
    state="firing",
    since=NOW - 600,
    value=0.31,
    samples=42,
    evaluated_at=NOW,
    clear_since=NOW - 5,
    resolved_at=NOW - 3600,
    notified_state="firing",
    notified_at=NOW - 60,
    reminders=3,
    unsent="firing",
)
PENDING = MonitorState(monitor_id="pending", state="pending", since=NOW - 20, value=0.5, samples=7, evaluated_at=NOW)

# (monitor_id, state, since, firing_notified, pending) as the tables held them before: notified_at
# an hour ago for all
OLD_ROWS = [
    ("told", "firing", NOW - 3600, True, None),
    ("hidden", "firing", NOW - 1800, False, None),  # fired inside the old cooldown: "suppressed", never sent
    ("resolved", "resolved", NOW - 900, True, None),
    ("quiet", "ok", None, False, None),
    ("cut-off", "firing", NOW - 60, True, "firing"),  # its message was cut off by a stop
]
EXPECTED = {  # (notified_state, resolved_at, unsent)
    "told": ("firing", None, None),
    "hidden": (None, None, None),
    "resolved": ("resolved", NOW - 900, None),
    "quiet": (None, None, None),
    "cut-off": ("firing", None, "firing"),
}

_OLD_COLUMNS = tuple((n, t) for n, t in tables.MONITOR_STATE_COLUMNS if n not in tables.MONITOR_STATE_V7)


def _old_table(dialect: str) -> list[str]:
    return ["DROP TABLE monitor_state", tables.create_table("monitor_state", _OLD_COLUMNS, dialect=dialect)]


def _old_insert(mark: str, ts: str) -> tuple[str, list[list[Any]]]:
    sql = (
        "INSERT INTO monitor_state (monitor_id, state, since, value, samples, evaluated_at, notified_at, "
        f"firing_notified, pending, updated_at) VALUES ({mark}, {mark}, {ts}, 0.5, 10, {ts}, {ts}, {mark}, {mark}, "
        f"{ts})"
    )
    return sql, [[r[0], r[1], r[2], NOW, NOW - 3600, r[3], r[4], NOW] for r in OLD_ROWS]


def _check_upgraded(states: list[MonitorState]) -> None:
    by_id = {s.monitor_id: s for s in states}
    assert set(by_id) == set(EXPECTED)
    for monitor_id, (told, resolved_at, unsent) in EXPECTED.items():
        s = by_id[monitor_id]
        assert (s.notified_state, s.resolved_at, s.unsent, s.reminders, s.clear_since) == (
            told,
            pytest.approx(resolved_at) if resolved_at else None,
            unsent,
            0,
            None,
        ), monitor_id
    m = MonitorSettings.model_validate(
        {
            "id": "hidden",
            "scorer": "s",
            "aggregate": "pass_rate",
            "window": "1h",
            "below": 0.8,
            "cooldown": "1h",
            "notify": [{"webhook": "http://127.0.0.1:1/x"}],
        }
    )
    # the firing the old cooldown hid: its cooldown (from the last message, an hour ago) is over
    hidden = by_id["hidden"]
    assert decide(m, hidden, hidden, NOW)[1] == Notice(send="firing")
    told = by_id["told"]
    assert decide(m.model_copy(update={"id": "told"}), told, told, NOW)[1] == Notice()  # no repeat after the upgrade


async def _round_trip_then_upgrade(make: Callable[[], Any], downgrade: Callable[[], None]) -> None:
    """Save and load every field (and an upsert); put the table back as it was before (``downgrade``),
    then start again: the migration brings the rows back as meant."""
    store = make()
    await store.start()
    try:
        await store.save_monitors([FULL, PENDING], [MonitorEvent(monitor_id="full", at=NOW, event="fired")])
        stored = await store.monitor_states(["full", "pending", "unknown"])
        assert sorted(stored, key=lambda s: s.monitor_id) == [FULL, PENDING]
        await store.save_monitors([MonitorState(monitor_id="pending", state="ok")], [])  # an upsert
        [again] = await store.monitor_states(["pending"])
        assert again.state == "ok" and again.since is None
    finally:
        await store.stop()
    downgrade()
    store = make()
    await store.start()
    try:
        _check_upgraded(await store.monitor_states([r[0] for r in OLD_ROWS]))
    finally:
        await store.stop()


def _downgrade(con: Any, dialect: str, mark: str, ts: str, version: str) -> None:
    for statement in _old_table(dialect):
        con.execute(statement)
    sql, rows = _old_insert(mark, ts)
    for row in rows:
        con.execute(sql, row)
    con.execute(f"UPDATE schema_info SET value = '{version}' WHERE key = 'version'")


async def test_duckdb_round_trips_every_field_and_upgrades_version_6(tmp_path):
    path = tmp_path / "m.duckdb"

    def downgrade() -> None:
        con = duckdb.connect(str(path))
        try:
            _downgrade(con, "duckdb", "?", "to_timestamp(?::DOUBLE)", "6")
        finally:
            con.close()

    await _round_trip_then_upgrade(lambda: DuckDBStore(path), downgrade)


async def test_postgres_round_trips_every_field_and_upgrades_version_1(pg_dsn):
    def downgrade() -> None:
        with psycopg.connect(pg_dsn, autocommit=True) as con:
            con.execute("SET search_path TO tracescorer")
            _downgrade(con, "postgres", "%s", "to_timestamp(%s)", "1")

    await _round_trip_then_upgrade(lambda: PostgresResultStore(pg_dsn), downgrade)
