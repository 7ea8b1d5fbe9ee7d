"""Versioned schema: a database from the first release opens and upgrades; a fresh one is created at
the latest version with exactly the same tables; a newer one is refused."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from support.db import fetch

from tracescorer.store.api import StoreError
from tracescorer.store.duckdb import DuckDBStore, layout, readonly
from tracescorer.store.duckdb.migrations import MIGRATIONS, Migration, _span_logs, latest_version, migrate

V1 = Path(__file__).resolve().parents[2] / "data" / "schema" / "v1.sql"


def _v1_database(path: Path) -> None:
    con = duckdb.connect(str(path))
    con.execute(V1.read_text())  # every statement of the file
    con.execute("INSERT INTO runs (run_id, trace_id, agent_name) VALUES ('r1', 't1', 'old-agent')")
    con.execute("INSERT INTO scores (id, scorer_id, score, status) VALUES ('s1', 'judge', 0.5, 'ok')")
    con.execute(
        "INSERT INTO spans (trace_id, span_id, name, received_at) VALUES "
        "('t1', 's1', 'old-span', now()), ('t1', 's2', 'old-child', now())"
    )
    con.execute("INSERT INTO log_records (trace_id, body, received_at) VALUES ('t1', '\"old-log\"', now())")
    con.close()


def _columns(path: Path) -> dict[str, list[tuple[str, str]]]:
    con = readonly.connect(path)  # both files: the main database and its span log
    try:
        rows = con.execute(
            "SELECT CASE WHEN table_catalog = current_database() THEN 'main' ELSE table_catalog END, "
            "table_name, column_name, data_type FROM information_schema.columns ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()
    out: dict[str, list[tuple[str, str]]] = {}
    for catalog, table, column, kind in rows:
        out.setdefault(f"{catalog}.{table}", []).append((column, kind))
    return out


async def test_first_release_database_opens_upgraded_with_its_rows(tmp_path):
    old, fresh = tmp_path / "old.duckdb", tmp_path / "fresh.duckdb"
    _v1_database(old)
    for path in (old, fresh):
        store = DuckDBStore(path)
        await store.start()
        if path == old:
            assert await fetch(store, "SELECT agent_name FROM runs") == [("old-agent",)]
            assert await fetch(store, "SELECT score FROM scores") == [(0.5,)]
            assert await fetch(store, "SELECT value FROM schema_info WHERE key = 'version'") == [
                (str(latest_version()),)
            ]
            # the span log moved to its own file, read through views of the same names
            assert await fetch(store, "SELECT name FROM spans ORDER BY span_id") == [("old-span",), ("old-child",)]
            assert await fetch(store, "SELECT body FROM log_records") == [('"old-log"',)]
        await store.stop()
    assert _columns(old) == _columns(fresh)  # version 1 + every migration == the latest schema
    assert {"main.spans", "ts_spans_a.spans", "ts_spans_b.log_records"} <= set(_columns(fresh))
    for name, n in zip(layout.span_log_paths(old), (2, 0), strict=False):  # the first span log file has the rows
        con = duckdb.connect(name, read_only=True)
        assert con.execute("SELECT count(*) FROM spans").fetchall() == [(n,)]
        con.close()


async def test_a_crash_between_the_span_log_copy_and_the_upgrade_copies_again_without_duplicates(tmp_path):
    path = tmp_path / "old.duckdb"
    _v1_database(path)
    con = duckdb.connect(str(path))
    layout.attach(con, path)
    _span_logs(con)  # the copy committed; the main database was not upgraded (killed here)
    con.close()
    store = DuckDBStore(path)
    await store.start()
    try:
        assert await fetch(store, "SELECT count(*) FROM spans") == [(2,)]
        assert await fetch(store, "SELECT count(*) FROM log_records") == [(1,)]
    finally:
        await store.stop()


async def test_a_database_whose_span_log_file_is_missing_is_refused_naming_it(tmp_path):
    path = tmp_path / "d.duckdb"
    store = DuckDBStore(path)
    await store.start()
    await store.stop()
    for name in layout.files(path)[4:]:  # the second span log and its WAL
        Path(name).unlink(missing_ok=True)
    with pytest.raises(StoreError, match=r"span log .*d\.spans-b\.duckdb.* is missing"):
        await DuckDBStore(path).start()
    with pytest.raises(readonly.QueryError, match="is missing"):
        readonly.connect(path)


async def test_newer_schema_is_refused_with_a_clear_error(tmp_path):
    path = tmp_path / "new.duckdb"
    _v1_database(path)
    con = duckdb.connect(str(path))
    con.execute("UPDATE schema_info SET value = '999' WHERE key = 'version'")
    con.close()
    with pytest.raises(StoreError, match="version 999, newer"):
        await DuckDBStore(path).start()


def test_migrations_apply_in_order_and_roll_back_on_failure(tmp_path):
    path = tmp_path / "m.duckdb"
    _v1_database(path)
    con = duckdb.connect(str(path))
    layout.attach(con, path)
    steps = [
        *MIGRATIONS,
        Migration(latest_version() + 1, "add a column", ("ALTER TABLE runs ADD COLUMN extra INTEGER",)),
    ]
    assert migrate(con, steps) == (1, latest_version() + 1)
    assert "extra" in [r[0] for r in con.execute("DESCRIBE runs").fetchall()]
    broken = [
        *steps,
        Migration(
            latest_version() + 2,
            "breaks",
            ("ALTER TABLE runs ADD COLUMN more INTEGER", "ALTER TABLE no_such ADD COLUMN x INTEGER"),
        ),
    ]
    with pytest.raises(duckdb.Error):
        migrate(con, broken)
    assert con.execute("SELECT value FROM schema_info WHERE key = 'version'").fetchone() == (str(latest_version() + 1),)
    assert "more" not in [r[0] for r in con.execute("DESCRIBE runs").fetchall()]
    con.close()
