"""The store's files: the span log in two files beside the database, appends moved to one while
the other checkpoints, both read as one table, and the files checked to belong together."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import duckdb
import pytest
from prometheus_client import generate_latest
from support import store_ops
from support.daemon import wait_for_async
from support.db import fetch, scalar

from tracescorer.metrics import Metrics
from tracescorer.model import AgentRun, Message, Span
from tracescorer.store.api import ReadOnlyViolation
from tracescorer.store.duckdb import DuckDBStore, layout, readonly, spanlog, wire
from tracescorer.store.duckdb import scores as duckdb_scores
from tracescorer.store.duckdb.engine import Engine


def _spans(batch: int, n: int = 50) -> list[Span]:
    return [
        Span(
            trace_id=f"{batch:032x}",
            span_id=f"{batch * 1000 + i + 1:016x}",
            parent_span_id=None,
            name="step",
            kind="internal",
            start_time_unix_nano=i,
            end_time_unix_nano=i + 1,
            attributes={"payload": "x" * 400, "i": i},
        )
        for i in range(n)
    ]


def _rows_per_file(path: Path) -> list[int]:
    con = readonly.connect(path)
    try:
        return store_ops.span_log_counts(con)
    finally:
        con.close()


def test_file_names_follow_the_database():
    assert layout.span_log_paths("/data/ts.duckdb") == ["/data/ts.spans-a.duckdb", "/data/ts.spans-b.duckdb"]
    assert layout.span_log_paths("/data/ts") == ["/data/ts.spans-a", "/data/ts.spans-b"]
    assert layout.files("/d/x.db") == [
        "/d/x.db",
        "/d/x.db.wal",
        "/d/x.spans-a.db",
        "/d/x.spans-a.db.wal",
        "/d/x.spans-b.db",
        "/d/x.spans-b.db.wal",
    ]
    assert layout.files(":memory:") == []


async def test_appends_alternate_between_the_span_logs_as_they_checkpoint_and_nothing_is_lost(tmp_path):
    path = tmp_path / "s.duckdb"
    # a WAL this small passes the threshold after a few appends: the checkpointer moves appends
    # to the other span log, checkpoints the first, and so on
    metrics = Metrics()
    store = DuckDBStore(path, checkpoint_threshold="64KB", observer=metrics)
    await store.start()
    batches = 0
    try:

        async def both_logs_hold_rows() -> bool:
            nonlocal batches
            await store.append(_spans(batches))
            batches += 1
            return min(await store.read(store_ops.span_log_counts)) > 0

        await wait_for_async(both_logs_hold_rows, timeout_s=60, what="appends in both span logs")
        for _ in range(3):
            await store.append(_spans(batches))
            batches += 1
        assert await scalar(store, "SELECT count(*) FROM spans") == batches * 50
        assert await scalar(store, "SELECT count(DISTINCT span_id) FROM spans") == batches * 50
    finally:
        await store.stop()
    # each checkpoint was reported with a later reply: operators see how long commits waited
    exposed = generate_latest(metrics.registry).decode()
    counted = [
        float(x.rpartition(" ")[2])
        for x in exposed.splitlines()
        if x.startswith('tracescorer_store_checkpoint_seconds_count{database="span_log"}')
    ]
    assert counted and counted[0] >= 1
    per_file = _rows_per_file(path)
    assert sum(per_file) == batches * 50 and min(per_file) > 0
    reopened = DuckDBStore(path)  # both files are read after a restart
    await reopened.start()
    try:
        assert await scalar(reopened, "SELECT count(*) FROM spans") == batches * 50
        per_trace = "SELECT count(*) FROM spans WHERE trace_id = ?"
        assert [await scalar(reopened, per_trace, f"{t:032x}") for t in (0, batches - 1)] == [50, 50]
    finally:
        await reopened.stop()


def test_a_database_from_before_the_split_is_read_as_it_is(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE spans (trace_id VARCHAR)")
    con.execute("INSERT INTO spans VALUES ('t')")
    con.close()
    ro = readonly.connect(path)  # read-only: nothing attached, nothing created beside it
    try:
        assert ro.execute("SELECT count(*) FROM spans").fetchall() == [(1,)]
    finally:
        ro.close()
    assert not any(os.path.exists(p) for p in layout.span_log_paths(path))


async def test_query_path_refuses_the_span_log_catalogs_by_name(tmp_path):
    store = DuckDBStore(tmp_path / "q.duckdb")
    await store.start()
    try:
        with pytest.raises(ReadOnlyViolation, match="only the database's own tables"):
            await fetch(store, f"SELECT * FROM {layout.SPAN_LOGS[0]}.spans")
    finally:
        await store.stop()


async def test_the_size_metric_counts_every_file_of_the_store(tmp_path):
    path = tmp_path / "m.duckdb"
    store = DuckDBStore(path)
    await store.start()
    try:
        await store.append(_spans(1))
    finally:
        await store.stop()
    metrics = Metrics()
    metrics.track_db_size(layout.files(path))
    line = next(
        x
        for x in generate_latest(metrics.registry).decode().splitlines()
        if x.startswith("tracescorer_store_db_size_bytes")
    )
    assert float(line.split()[-1]) == sum(os.path.getsize(p) for p in layout.files(path) if os.path.exists(p))
    assert sum(os.path.getsize(p) for p in layout.span_log_paths(path)) > 0


def test_a_checkpoint_and_the_commit_go_out_with_one_reply_of_a_group_commit():
    metas: list[dict[str, object]] = []
    engine = Engine(wire.EngineOptions(path=":memory:"), lambda req_id, ok, result, meta: metas.append(meta))
    try:
        engine._checkpoint(layout.main_catalog(engine._con))
        for i in range(3):
            engine.dispatch(i, wire.WRITE, (duckdb_scores.write_scores, ([], [], [], [])))
        engine._commit(engine._stage.take(engine.options.max_batch_items) or [], engine._con)
    finally:
        engine._con.close()
    assert [len(m.get("checkpoints", ())) for m in metas] == [1, 0, 0]  # type: ignore[arg-type]
    assert len({m["commit_id"] for m in metas}) == 1 and ["commit_s" in m for m in metas] == [True, False, False]


def test_a_span_log_write_gets_a_transaction_of_its_own():
    """A DuckDB transaction writes one file: the prune of a span log is never batched with the
    main database's writes (the batch would fail and be retried job by job)."""
    engine = Engine(wire.EngineOptions(path=":memory:"), lambda *a: None)
    old = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    scores = (duckdb_scores.write_scores, ([], [], [], []))
    jobs = [
        scores,
        scores,
        (spanlog.prune_spans, (layout.SPAN_LOGS[0], old)),
        scores,
        (spanlog.prune_spans, (layout.SPAN_LOGS[1], old)),
        scores,
    ]
    for i, job in enumerate(jobs):
        engine.dispatch(i, wire.WRITE, job)
    batches = []
    while engine._stage.jobs:
        batches.append([job.req_id for job in engine._stage.take(engine.options.max_batch_items) or []])
    assert batches == [[0, 1], [2], [3], [4], [5]]
    engine._con.close()


def _rows_per_row_group(con: duckdb.DuckDBPyConnection, table: str) -> list[int]:
    rows = con.execute(
        f"SELECT row_group_id, sum(count) FROM pragma_storage_info('{table}') "
        "WHERE column_id = 0 AND column_path = '[0]' GROUP BY ALL ORDER BY 1"
    ).fetchall()
    return [int(n) for _, n in rows]


def _runs(first: int, n: int) -> list[AgentRun]:
    return [
        AgentRun(
            run_id=f"run-{i}",
            trace_id=f"{i:032x}",
            span_id=f"{i + 1:016x}",
            parent_span_id=None,
            conversation_id=None,
            resource_id=None,
            agent_name="a",
            agent_id=None,
            service_name="svc",
            model="m",
            error=None,
            convention="genai",
            started_at=i,
            ended_at=i + 1,
            status="ok",
            input_messages=(Message(role="user", content=f"q{i}"),),
        )
        for i in range(first, first + n)
    ]


async def test_every_database_is_written_in_row_groups_of_the_layouts_size(tmp_path):
    # a checkpoint rewrites each table's last, partly filled row group: the row group size bounds
    # that rewrite (see the layout module); DuckDB does not keep it in the file, so every open passes it
    path = tmp_path / "rg.duckdb"
    total = 2 * layout.ROW_GROUP_SIZE + 500
    for restart in range(2):  # and again after a restart, on the same files
        store = DuckDBStore(path)
        await store.start()
        try:
            for first in range(restart * total, (restart + 1) * total, 2000):
                n = min(2000, (restart + 1) * total - first)
                await store.append(_spans(first, n))
                await store.upsert_runs(_runs(first, n))
        finally:
            await store.stop()  # checkpoints every database
        con = duckdb.connect(str(path), read_only=True)
        try:
            layout.attach(con, path, read_only=True)
            for table in ("runs", f"{layout.SPAN_LOGS[0]}.spans"):
                groups = _rows_per_row_group(con, table)
                assert sum(groups) == (restart + 1) * total, table
                assert max(groups) <= layout.ROW_GROUP_SIZE and len(groups) >= 2 * (restart + 1) + 1, (table, groups)
        finally:
            con.close()


@pytest.mark.parametrize("stem", ["memory", "my-store", layout.SPAN_LOGS[0]])
async def test_a_database_named_like_a_catalog_or_not_like_an_identifier_works_and_checkpoints(tmp_path, stem):
    path = tmp_path / f"{stem}.duckdb"
    for restart in range(2):
        store = DuckDBStore(path)
        await store.start()
        try:
            await store.append(_spans(restart))
            await store.upsert_runs(_runs(restart, 1))
            assert await scalar(store, "SELECT count(*) FROM spans") == 50 * (restart + 1)
            assert await scalar(store, "SELECT count(*) FROM runs") == restart + 1
        finally:
            await store.stop()
        # the close checkpointed every database: no write-ahead log is left to replay
        assert [p for p in layout.files(path) if p.endswith(".wal") and os.path.exists(p)] == []
