"""Versioned schema: a database from the first release opens and upgrades; a fresh one is created at
the latest version with exactly the same tables; a newer one is refused."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from support.db import fetch
from tracescorer.store.base import StoreError
from tracescorer.store.duckdb import DuckDBStore
from tracescorer.store.migrations import MIGRATIONS, Migration, latest_version, migrate

V1 = Path(__file__).resolve().parents[2] / "data" / "schema" / "v1.sql"


def _v1_database(path: Path) -> None:
    con = duckdb.connect(str(path))
    con.execute(V1.read_text())  # every statement of the file
    con.execute("INSERT INTO runs (run_id, trace_id, agent_name) VALUES ('r1', 't1', 'old-agent')")
    con.execute("INSERT INTO scores (id, scorer_id, score, status) VALUES ('s1', 'judge', 0.5, 'ok')")
    con.close()


def _columns(path: Path) -> dict[str, list[tuple[str, str]]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        rows = con.execute("SELECT table_name, column_name, data_type FROM information_schema.columns "
                           "ORDER BY table_name, ordinal_position").fetchall()
    finally:
        con.close()
    out: dict[str, list[tuple[str, str]]] = {}
    for table, column, kind in rows:
        out.setdefault(table, []).append((column, kind))
    return out


async def test_first_release_database_opens_upgraded_with_its_rows(tmp_path):
    old, fresh = tmp_path / "old.duckdb", tmp_path / "fresh.duckdb"
    _v1_database(old)
    for path in (old, fresh):
        store = DuckDBStore(path)
        await store.open()
        if path == old:
            assert await fetch(store, "SELECT agent_name FROM runs") == [("old-agent",)]
            assert await fetch(store, "SELECT score FROM scores") == [(0.5,)]
            assert await fetch(store, "SELECT value FROM schema_info WHERE key = 'version'") == [(str(latest_version()),)]
        await store.close()
    assert _columns(old) == _columns(fresh)  # version 1 + every migration == the latest schema


async def test_newer_schema_is_refused_with_a_clear_error(tmp_path):
    path = tmp_path / "new.duckdb"
    _v1_database(path)
    con = duckdb.connect(str(path))
    con.execute("UPDATE schema_info SET value = '999' WHERE key = 'version'")
    con.close()
    with pytest.raises(StoreError, match="version 999, newer"):
        await DuckDBStore(path).open()


def test_migrations_apply_in_order_and_roll_back_on_failure(tmp_path):
    path = tmp_path / "m.duckdb"
    _v1_database(path)
    con = duckdb.connect(str(path))
    steps = [*MIGRATIONS, Migration(latest_version() + 1, "add a column", ("ALTER TABLE runs ADD COLUMN extra INTEGER",))]
    assert migrate(con, steps) == (1, latest_version() + 1)
    assert "extra" in [r[0] for r in con.execute("DESCRIBE runs").fetchall()]
    broken = [*steps, Migration(latest_version() + 2, "breaks", ("ALTER TABLE runs ADD COLUMN more INTEGER",
                                                                  "ALTER TABLE no_such ADD COLUMN x INTEGER"))]
    with pytest.raises(duckdb.Error):
        migrate(con, broken)
    assert con.execute("SELECT value FROM schema_info WHERE key = 'version'").fetchone() == (str(latest_version() + 1),)
    assert "more" not in [r[0] for r in con.execute("DESCRIBE runs").fetchall()]
    con.close()
