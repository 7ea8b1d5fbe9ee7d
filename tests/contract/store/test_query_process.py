"""The query box: a query runs in a query process of its own, reading the store's tables through
filtered scans. It answers what the store's own connection answers; memory bombs end there with a
clear error while the store process writes on; a query process that does not stop is killed at the
timeout; the filters pushed to the store keep every row a query needs."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import signal
import time

import duckdb
import psutil
import pytest
from support import store_ops
from support.daemon import wait_for_async
from support.records import numbered_run

from tracescorer.model import AgentRun, Span
from tracescorer.records.scores import ScoreRecord
from tracescorer.store.api import ReadOnlyViolation, StoreError
from tracescorer.store.duckdb import DuckDBStore
from tracescorer.store.duckdb.pushdown import pushdowns, scan_sql
from tracescorer.store.duckdb.readfile import ReadOnlyFile

BOMBS = ["SELECT len(range(1500000000)) AS n", "SELECT length(repeat('x', 3000000000)) AS n"]
GROWING = "SELECT list(i) AS l FROM range(300000000) t(i)"  # allocates step by step until the ceiling


def _span(i: int, trace: int, **kw: object) -> Span:
    fields: dict[str, object] = {
        "trace_id": f"{trace:032x}",
        "span_id": f"{i + 1:016x}",
        "parent_span_id": None if i % 3 == 0 else f"{i:016x}",
        "name": f"s{i % 7}",
        "kind": "internal",
        "start_time_unix_nano": i,
        "end_time_unix_nano": i + 1,
        "attributes": {"i": i, "even": i % 2 == 0},
        "status_code": "error" if i % 5 == 0 else "ok",
    }
    fields.update(kw)
    return Span(**fields)  # type: ignore[arg-type]


def _run(i: int) -> AgentRun:
    return numbered_run(i, f"c{i % 4}" if i % 6 else None, trace=i % 10)


def _score(i: int) -> ScoreRecord:
    return ScoreRecord(
        id=f"score-{i}",
        scorer_id=f"s{i % 3}",
        scorer_name="S",
        run_id=f"run-{i}",
        trace_id=f"{i % 10:032x}",
        span_id=None,
        conversation_id=None,
        entity_type="agent",
        entity_id="support",
        source="live",
        score=i / 40,
        reason=f"r{i}",
        status="ok" if i % 4 else "error",
    )


@pytest.fixture
async def filled(tmp_path):
    store = DuckDBStore(tmp_path / "box.duckdb", query_memory_limit="256MB")
    await store.start()
    await store.append([_span(i, trace=i % 10) for i in range(200)])
    await store.upsert_runs([_run(i) for i in range(40)])
    await store.write_scores([_score(i) for i in range(0, 40, 2)], [])
    yield store
    await store.stop()


T3 = f"{3:032x}"
SINCE = dt.datetime(1970, 1, 1, tzinfo=dt.UTC).isoformat()
QUERIES: list[tuple[str, list[object]]] = [
    ("SELECT span_id, name, attributes->>'i' AS i FROM spans WHERE trace_id = ?", [T3]),
    ("SELECT count(*) FROM spans", []),
    (
        "SELECT name, count(*) FROM spans s WHERE s.trace_id IN (?, ?) AND status_code = 'error' GROUP BY name",
        [T3, "x"],
    ),
    ("SELECT span_id FROM spans WHERE start_time_unix_nano BETWEEN 10 AND ? AND name LIKE 's%'", [40]),
    ("SELECT span_id FROM spans WHERE parent_span_id IS NULL AND NOT (name = 's1')", []),
    # self-join: each reference its own filter, the table read with both
    (
        "SELECT a.span_id, b.span_id FROM spans a JOIN spans b ON a.trace_id = b.trace_id WHERE a.name = ? AND b.name = 's2'",
        ["s1"],
    ),
    # outer joins: nothing pushed under them (IS NULL keeps rows a pushed filter would drop)
    ("SELECT r.run_id FROM runs r LEFT JOIN scores s ON s.run_id = r.run_id WHERE s.id IS NULL", []),
    (
        "SELECT r.run_id, s.score FROM runs r LEFT JOIN scores s ON s.run_id = r.run_id AND s.scorer_id = ? WHERE r.conversation_id = 'c1'",
        ["s0"],
    ),
    (
        "SELECT count(*) FROM runs r WHERE NOT EXISTS (SELECT 1 FROM scores s WHERE s.run_id = r.run_id AND s.scorer_id = ?)",
        ["s1"],
    ),
    # a CTE of a table's name is not the table
    ("WITH spans AS (SELECT 1 AS trace_id) SELECT * FROM spans WHERE trace_id = 1", []),
    ("SELECT trace_id FROM spans WHERE trace_id = ? UNION SELECT trace_id FROM runs WHERE run_id = ?", [T3, "run-7"]),
    ("SELECT run_id FROM runs WHERE started_at >= CAST(? AS TIMESTAMPTZ) AND conversation_id IS NOT NULL", [SINCE]),
    (
        "SELECT scorer_id, avg(score) FILTER (WHERE status = 'ok') FROM scores WHERE updated_at > now() - INTERVAL 1 DAY GROUP BY ALL",
        [],
    ),
    ("SELECT * FROM (SELECT run_id, trace_id FROM runs) AS r WHERE r.trace_id = ?", [T3]),
    ("SELECT run_id, row_number() OVER (PARTITION BY conversation_id ORDER BY started_at_unix_nano) FROM runs", []),
    ("SELECT s.id FROM scores s NATURAL JOIN runs WHERE s.status = 'error'", []),
    ("SELECT s.id FROM scores s JOIN runs r USING (run_id) WHERE run_id = ? OR run_id = ?", ["run-2", "run-4"]),
    ("SELECT trace_id FROM spans WHERE trace_id = $2 AND name <> $1", ["s1", T3]),
    ("SELECT count(*) FROM spans WHERE 1 = 1 AND trace_id = ?", [T3]),
]


def _sorted(rows: list[tuple[object, ...]]) -> list[str]:
    return sorted(json.dumps(r, default=str) for r in rows)


async def test_the_box_answers_what_the_stores_own_connection_answers(filled):
    for sql, params in QUERIES:
        boxed = await filled.query(sql, max_rows=10_000, timeout_s=30, params=params)
        direct = await filled.read(store_ops.rows, sql, params)
        assert _sorted(boxed.rows) == _sorted(direct), sql
    described = await filled.query("DESCRIBE runs", max_rows=100, timeout_s=30)
    types = {r[0]: r[1] for r in described.rows}
    assert types["started_at"] == "TIMESTAMP WITH TIME ZONE" and types["input_messages"] == "JSON"
    result = await filled.query("SELECT attributes FROM spans LIMIT 1", max_rows=1, timeout_s=30)
    assert result.types == ["JSON"]
    tables = await filled.query(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'scores'", max_rows=1, timeout_s=30
    )
    assert tables.rows == [(1,)]


def test_filters_are_pushed_where_they_keep_every_row_a_query_needs():
    con = duckdb.connect()
    columns = {
        "spans": frozenset({"trace_id", "span_id", "name", "start_time_unix_nano"}),
        "runs": frozenset({"run_id", "trace_id", "started_at"}),
    }

    def pushed(sql: str, params: list[object] | None = None) -> dict[str, str | None]:
        tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0][0])
        out: dict[str, str | None] = {}
        for table, p in pushdowns(tree, columns, params or []).items():
            rendered = scan_sql(con, table, sorted(columns[table]), ["trace_id"], p.where)
            out[table] = rendered.partition("WHERE ")[2].removesuffix(") AS ts_scan") or None
        return out

    assert pushed("SELECT * FROM spans WHERE trace_id = ?", ["t"]) == {"spans": "(trace_id = $1)"}
    assert pushed("SELECT * FROM spans s WHERE s.name LIKE 'a%' AND len(range(10)) > 1") == {
        "spans": "(\"name\" ~~ 'a%')"
    }
    assert pushed(
        "SELECT * FROM spans a JOIN runs r USING (trace_id) WHERE r.started_at > CAST(? AS TIMESTAMPTZ)", ["x"]
    ) == {
        "spans": None,
        "runs": "(started_at > CAST($1 AS TIMESTAMPTZ))",
    }
    # under an outer join, with a non-deterministic side, a function call or a subquery: every row
    assert pushed("SELECT * FROM runs LEFT JOIN spans ON true WHERE spans.name = 'x'") == {"runs": None, "spans": None}
    assert pushed("SELECT * FROM runs WHERE started_at > now()") == {"runs": None}
    assert pushed("SELECT * FROM spans WHERE lower(name) = 'x'") == {"spans": None}
    assert pushed("SELECT * FROM spans WHERE trace_id IN (SELECT trace_id FROM runs)") == {"spans": None, "runs": None}
    # two references: either's filter
    assert pushed("SELECT * FROM spans WHERE name = 'a' UNION ALL SELECT * FROM spans WHERE name = 'b'") == {
        "spans": "((\"name\" = 'a') OR (\"name\" = 'b'))"
    }


def test_a_scan_outside_the_rules_is_refused_by_the_store():
    con = duckdb.connect()
    con.execute("CREATE TABLE spans (trace_id VARCHAR, name VARCHAR)")
    bomb = json.loads(
        con.execute("SELECT json_serialize_sql('SELECT 1 WHERE len(range(1500000000)) > 0')").fetchall()[0][0]
    )
    where = bomb["statements"][0]["node"]["where_clause"]
    for columns, filter_ in ((["trace_id"], where), (["secret"], None), ([], None)):
        with pytest.raises(ValueError):
            scan_sql(con, "spans", ["trace_id", "name"], columns, filter_)


def _rss(pid: int) -> int:
    return psutil.Process(pid).memory_info().rss


async def test_memory_bombs_end_in_their_query_process_while_the_store_writes_on(filled):
    pid = filled.process_pid
    assert pid is not None
    before = _rss(pid)
    peak = before
    sampling = True

    async def sample() -> None:
        nonlocal peak
        while sampling:
            peak = max(peak, _rss(pid))
            await asyncio.sleep(0.01)

    sampler = asyncio.create_task(sample())
    try:
        for sql in [*BOMBS, GROWING]:
            query = asyncio.create_task(filled.query(sql, max_rows=1, timeout_s=30))
            # score writes go on meanwhile
            await filled.write_scores([_score(100 + len(sql))], [])
            with pytest.raises(StoreError, match=r"store\.query_memory_limit \(?256MB"):
                await query
    finally:
        sampling = False
        await sampler
    assert peak - before < 200 * 2**20, f"the store process grew from {before >> 20} to {peak >> 20} MiB"
    assert filled.process_pid == pid  # the store process never went
    # the box goes on: the next query answers
    assert (await filled.query("SELECT count(*) FROM scores", max_rows=1, timeout_s=30)).rows == [(23,)]


async def test_a_query_process_that_does_not_stop_is_killed_at_the_timeout(tmp_path):
    # a short grace past the timeout: the process never answers, so nothing is cut short by it
    store = DuckDBStore(tmp_path / "k.duckdb", query_max_concurrent=1, query_grace_s=0.1)
    await store.start()
    try:
        assert (await store.query("SELECT 1", max_rows=1, timeout_s=30)).rows == [(1,)]
        [box] = [p for p in psutil.Process(store.process_pid).children() if "queryproc" in " ".join(p.cmdline())]
        box.send_signal(signal.SIGSTOP)  # as a query that never reaches DuckDB's interrupt check
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"query timed out after 0.5s \(its process was stopped\)"):
            await store.query("SELECT 2", max_rows=1, timeout_s=0.5)
        assert time.monotonic() - started < 20
        await wait_for_async(lambda: not box.is_running() or box.status() == psutil.STATUS_ZOMBIE, 10, what="its end")
        assert (await store.query("SELECT 3", max_rows=1, timeout_s=30)).rows == [(3,)]  # in a new one
    finally:
        await store.stop()


async def test_queries_beyond_the_query_processes_wait_for_one(filled):
    slow = "SELECT count(*) FROM range(30000000) a, range(3) b"
    results = await asyncio.gather(*(filled.query(slow, max_rows=1, timeout_s=60) for _ in range(5)))
    assert [r.rows for r in results] == [[(90_000_000,)]] * 5
    boxes = [p for p in psutil.Process(filled.process_pid).children() if "queryproc" in " ".join(p.cmdline())]
    assert len(boxes) == 2  # store.query_max_concurrent


async def test_the_guard_and_the_result_bound_hold_in_the_box(tmp_path):
    store = DuckDBStore(tmp_path / "r.duckdb", query_max_result_bytes=100_000)
    await store.start()
    try:
        with pytest.raises(ReadOnlyViolation, match="not DELETE"):
            await store.query("DELETE FROM spans", max_rows=1, timeout_s=10)
        with pytest.raises(StoreError, match="more than a query may return"):
            await store.query("SELECT repeat('x', 1000) FROM range(1000)", max_rows=1000, timeout_s=10)
        with pytest.raises(StoreError, match="no_such"):
            await store.query("SELECT * FROM no_such", max_rows=1, timeout_s=10)
    finally:
        await store.stop()


async def test_a_file_no_daemon_holds_is_read_under_the_same_ceiling(tmp_path):
    path = tmp_path / "f.duckdb"
    store = DuckDBStore(path)
    await store.start()
    await store.append([_span(i, trace=1) for i in range(10)])
    await store.stop()
    file = ReadOnlyFile(path, memory_limit="256MB")
    assert (
        await file.query("SELECT count(*) FROM spans WHERE name = ?", max_rows=1, timeout_s=30, params=["s1"])
    ).rows == [(2,)]
    for sql in [*BOMBS, GROWING]:
        with pytest.raises(StoreError, match=r"store\.query_memory_limit \(?256MB"):
            await file.query(sql, max_rows=1, timeout_s=30)
    with pytest.raises(StoreError, match="timed out after 0.5s"):
        await file.query("SELECT count(*) FROM range(10000000000000)", max_rows=1, timeout_s=0.5)
    with pytest.raises(ReadOnlyViolation):
        await file.query("WITH x AS (DELETE FROM spans RETURNING *) SELECT * FROM x", max_rows=1, timeout_s=10)
