"""The store's files: created for the daemon's user alone (0600, folders 0700), and a database and
its span logs belong together: a new database beside span logs left by another one, or span logs
of another database, are refused at start with a message naming the files."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import duckdb
import pytest
from support import store_ops
from support.db import fetch

from tracescorer.model import Span
from tracescorer.store.api import StoreError
from tracescorer.store.duckdb import DuckDBStore, layout, readonly


def _span(i: int) -> Span:
    return Span(
        trace_id=f"{i:032x}",
        span_id=f"{i:016x}",
        parent_span_id=None,
        name=f"s{i}",
        kind="internal",
        start_time_unix_nano=i,
        end_time_unix_nano=i + 1,
    )


async def _store_with_a_span(path: Path, i: int = 1) -> None:
    store = DuckDBStore(path)
    await store.start()
    try:
        await store.append([_span(i)])
    finally:
        await store.stop()


@pytest.fixture
def common_umask():
    old = os.umask(0o022)  # the common default: files 0644 unless the store process says otherwise
    yield
    os.umask(old)


async def test_database_files_and_folders_are_the_daemons_alone(tmp_path, common_umask):
    path = tmp_path / "m.duckdb"
    store = DuckDBStore(path, memory_limit="32MB")  # below the daemon's floor: a small sort spills
    await store.start()
    try:
        await store.append([_span(i) for i in range(3)])
        # a sort larger than memory_limit spills to the store's temporary folder, created then
        spill = "SELECT max(x) FROM (SELECT row_number() OVER (ORDER BY hash(i)) AS x FROM range(2000000) t(i))"
        assert await store.read(store_ops.rows, spill, []) == [(2_000_000,)]
        assert Path(f"{path}.tmp").is_dir()
        created = [Path(p) for p in layout.files(path) if os.path.exists(p)]
        assert {p.name for p in created} >= {"m.duckdb", "m.spans-a.duckdb", "m.spans-b.duckdb"}
        for p in created:
            assert stat.S_IMODE(p.stat().st_mode) == 0o600, (p, oct(p.stat().st_mode))
    finally:
        await store.stop()
    for p in tmp_path.rglob("*"):
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == (0o700 if p.is_dir() else 0o600), (p, oct(mode))


async def test_a_new_database_beside_span_logs_left_by_another_is_refused(tmp_path):
    path = tmp_path / "s.duckdb"
    await _store_with_a_span(path)
    for name in (path, Path(f"{path}.wal")):
        name.unlink(missing_ok=True)  # the database is gone, its span logs stay
    store = DuckDBStore(path)
    with pytest.raises(StoreError) as info:
        await store.start()
    message = str(info.value)
    for log_path in layout.span_log_paths(path):
        assert log_path in message
    assert "left by another database" in message and "score their traces again" in message
    assert not path.exists()  # nothing was created
    # moved away, a new store starts with a span log of its own
    for log_path in layout.span_log_paths(path):
        os.rename(log_path, f"{log_path}.old")
    await _store_with_a_span(path, 2)


async def test_span_logs_of_another_database_are_refused_naming_the_files(tmp_path):
    a, b = tmp_path / "a" / "ts.duckdb", tmp_path / "b" / "ts.duckdb"
    a.parent.mkdir()
    b.parent.mkdir()
    await _store_with_a_span(a, 1)
    await _store_with_a_span(b, 2)
    for log_a, log_b in zip(layout.span_log_paths(a), layout.span_log_paths(b), strict=True):
        shutil.copy(log_b, log_a)  # b's span logs beside a's database
    store = DuckDBStore(a)
    with pytest.raises(StoreError, match="belongs to another database") as info:
        await store.start()
    assert layout.span_log_paths(a)[0] in str(info.value) and str(a) in str(info.value)
    # the read commands' path on the file refuses them too
    with pytest.raises(readonly.QueryError, match="belongs to another database"):
        readonly.connect(a)


async def test_span_logs_from_before_their_stamp_are_claimed_once(tmp_path):
    path = tmp_path / "c.duckdb"
    await _store_with_a_span(path)
    con = duckdb.connect(str(path))
    layout.attach(con, path)
    for catalog in layout.SPAN_LOGS:  # as a store of the release before the stamp left them
        con.execute(f"DROP TABLE {catalog}.span_log_identity")
    con.execute("DELETE FROM schema_info WHERE key = 'database_id'")
    con.close()
    store = DuckDBStore(path)
    await store.start()
    try:
        assert await fetch(store, "SELECT name FROM spans") == [("s1",)]
        ids = await fetch(store, "SELECT value FROM schema_info WHERE key = 'database_id'")
        assert len(ids) == 1
    finally:
        await store.stop()
    con = readonly.connect(path)
    try:
        stamps = [con.execute(f"SELECT database_id FROM {c}.span_log_identity").fetchall() for c in layout.SPAN_LOGS]
    finally:
        con.close()
    assert stamps == [ids, ids]
