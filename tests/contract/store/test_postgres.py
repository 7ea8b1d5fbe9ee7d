"""The PostgreSQL result store on a real server: migrations, a restarted daemon's claims, the shared
token bucket and budget, export claims, and the read-only query path (guard, READ ONLY, role).
Claims across owners are tested on both engines in test_coordination.py."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
import pytest_asyncio
from support.postgres import create_database

from tracescorer.config import Settings
from tracescorer.lifecycle import Stages
from tracescorer.metrics import Metrics
from tracescorer.model import AgentRun, Message
from tracescorer.records.deliveries import Claim
from tracescorer.records.scores import ScoreRecord
from tracescorer.store.api import ReadOnlyViolation, StoreError
from tracescorer.store.factory import Stores, build_stores
from tracescorer.store.postgres.migrations import latest_version
from tracescorer.store.postgres.store import PostgresResultStore


def _run(i: int, conversation: str) -> AgentRun:
    return AgentRun(
        run_id=f"run-{i}",
        trace_id=f"{i:032x}",
        span_id=f"{i:016x}",
        parent_span_id=None,
        conversation_id=conversation,
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
        input_messages=(Message(role="user", content=f"q{i}\x00"),),
    )


def _score(i: int, cost: float | None = None) -> ScoreRecord:
    return ScoreRecord(
        id=f"score-{i}",
        scorer_id="s",
        scorer_name="S",
        run_id=f"run-{i}",
        trace_id=None,
        span_id=None,
        conversation_id=None,
        entity_type="agent",
        entity_id=None,
        source="live",
        score=1.0,
        reason="fine\x00",
        status="ok",
        judge_cost_usd=cost,
    )


@pytest.fixture
async def stores(pg_dsn, tmp_path):
    """Two daemons' result stores on one database (owners a and b)."""
    a = PostgresResultStore(pg_dsn, owner="a", instance_id="inst-a")
    b = PostgresResultStore(pg_dsn, owner="b", instance_id="inst-b")
    await asyncio.gather(a.start(), b.start())  # concurrent migration: one migrates, the other finds it done
    yield a, b
    await a.stop()
    await b.stop()


async def test_schema_is_versioned_and_a_newer_one_is_refused(stores, pg_dsn):
    _a, _ = stores
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        assert con.execute("SELECT value FROM tracescorer.schema_info").fetchone() == (str(latest_version()),)
        con.execute("UPDATE tracescorer.schema_info SET value = '99'")
    newer = PostgresResultStore(pg_dsn)
    with pytest.raises(StoreError, match="version 99, newer"):
        await newer.start()


async def test_a_restarted_daemon_releases_its_previous_claims(stores, pg_dsn):
    a, _ = stores
    await a.upsert_runs([_run(1, "c1")])
    assert len(await a.claim_conversations(idle_s=0, lease_s=300, limit=5, max_age_s=3600)) == 1
    restarted = PostgresResultStore(pg_dsn, owner="a2", instance_id="inst-a")  # same span log, new process
    await restarted.start()
    try:
        assert [
            c.conversation_id
            for c in await restarted.claim_conversations(idle_s=0, lease_s=300, limit=5, max_age_s=3600)
        ] == ["c1"]
    finally:
        await restarted.stop()


async def test_shared_token_bucket_and_spend(stores):
    a, b = stores
    waits = [await (a if i % 2 else b).take_judge_tokens("judge", 1, 4, 0.5) for i in range(5)]
    assert waits[:4] == [0, 0, 0, 0] and 0 < waits[4] <= 2.1  # four tokens shared, the fifth waits ~2 s
    await a.write_scores([_score(1, 0.25)], [])
    await b.write_scores([_score(2, 0.5)], [])
    assert await a.spent_today_usd() == await b.spent_today_usd() == 0.75
    assert (await a.query("SELECT reason FROM scores WHERE id = 'score-1'", max_rows=1, timeout_s=5)).rows == [
        ("fine\ufffd",)
    ]  # NUL cannot be stored in PostgreSQL text: replaced, not a failed batch


async def test_each_score_version_is_claimed_for_export_by_one_owner(stores):
    a, b = stores
    await a.write_scores([_score(i) for i in range(20)], [])
    due = await a.due_deliveries("otlp", "a", 100)
    claims = [Claim(score_id=d.id, version=d.version) for d in due]
    got_a, got_b = await asyncio.gather(
        a.claim_deliveries("otlp", "a", 30, claims), b.claim_deliveries("otlp", "b", 30, claims)
    )
    assert len(got_a) + len(got_b) == 20 and not set(got_a) & set(got_b)
    assert await b.due_deliveries("otlp", "b", 100) == [
        d for d in await b.due_deliveries("otlp", "b", 100) if d.id in got_b
    ]


@contextlib.asynccontextmanager
async def _composite(dsn: str, folder: Path) -> AsyncIterator[Stores]:
    """The parts of a postgres-mode daemon's store: a DuckDB span log, the results in PostgreSQL."""
    settings = {"store": {"path": str(folder / "span.duckdb"), "backend": "postgres", "postgres": {"dsn": dsn}}}
    stores = build_stores(Settings.model_validate(settings), Metrics(), owner="q", maintenance=False)
    stages = Stages(lambda: time.monotonic() + 30)
    for component in stores.components:
        await stages.enter(component)
    await stores.scores.write_scores([_score(1)], [])
    try:
        yield stores
    finally:
        await stages.aclose()


@pytest.fixture
async def composite(pg_dsn, tmp_path):
    async with _composite(pg_dsn, tmp_path) as stores:
        yield stores


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def refusing(pg_server, tmp_path_factory):
    """One composite store for every statement refused: each checks that nothing was written."""
    async with _composite(create_database(pg_server), tmp_path_factory.mktemp("refusing")) as stores:
        yield stores


REFUSED = [
    "DELETE FROM scores",
    "UPDATE scores SET score = 0",
    "INSERT INTO scores (id, scorer_id) VALUES ('x', 'y')",
    "CREATE TABLE evil (a int)",
    "COPY scores TO '/tmp/x.csv'",
    "SELECT 1; DELETE FROM scores",
    "EXPLAIN ANALYZE DELETE FROM scores",
    "SELECT pg_read_file('/etc/passwd')",
    "SELECT pg_catalog.pg_ls_dir('/')",
    "SELECT lo_import('/etc/passwd')",
    "SELECT set_config('role', 'postgres', true)",
    "SELECT query_to_xml('DELETE FROM scores', true, false, '')",
    "SELECT * FROM dblink('host=x', 'select 1') AS t(a int)",
    "SELECT * FROM scores JOIN spans ON true",
    "SELECT * FROM pg_catalog.pg_authid",
    "SELECT * FROM read_csv('/etc/passwd')",
]


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("sql", REFUSED)
async def test_the_query_path_refuses_writes_files_and_side_effects(refusing, sql):
    with pytest.raises(StoreError):  # ReadOnlyViolation, or an error for what cannot run at all
        await refusing.queries.query(sql, max_rows=10, timeout_s=5)
    assert (await refusing.queries.query("SELECT count(*) FROM scores", max_rows=1, timeout_s=5)).rows == [(1,)]


async def test_postgres_itself_refuses_what_a_guard_might_miss(composite):
    results = (
        composite.runs
    )  # the PostgreSQL store itself: no statement guard at this layer: READ ONLY and the query role hold
    with pytest.raises(StoreError, match="data-modifying"):
        await results.query("WITH d AS (DELETE FROM scores RETURNING id) SELECT * FROM d", max_rows=10, timeout_s=5)
    with pytest.raises(ReadOnlyViolation, match="permission denied"):
        await results.query("SELECT pg_read_file('/etc/hostname')", max_rows=10, timeout_s=5)
    with pytest.raises(ReadOnlyViolation, match="permission denied"):
        await results.query("SELECT lo_import('/etc/hostname')", max_rows=10, timeout_s=5)
    with pytest.raises(StoreError, match="timed out"):
        await results.query("SELECT count(*) FROM generate_series(1, 1000000000)", max_rows=1, timeout_s=0.3)
    assert (await composite.queries.query("SELECT count(*) FROM scores", max_rows=1, timeout_s=5)).rows == [(1,)]


async def test_queries_route_by_table_with_parameters_and_limits(composite):
    await composite.scores.write_scores([_score(i) for i in range(2, 6)], [])
    result = await composite.queries.query(
        "SELECT id FROM scores WHERE id <> ? AND reason LIKE '%fine%' ORDER BY id",
        max_rows=2,
        timeout_s=5,
        params=["score-1"],
    )
    assert result.rows == [("score-2",), ("score-3",)] and result.truncated and result.types == ["text"]
    spans = await composite.queries.query(
        "SELECT count(*) AS n FROM spans", max_rows=1, timeout_s=5
    )  # the local span log
    assert spans.rows == [(0,)]
    with pytest.raises(ReadOnlyViolation, match="span-log tables, per daemon"):
        await composite.queries.query("SELECT * FROM scroes", max_rows=1, timeout_s=5)


async def test_report_and_read_command_reads_run_on_postgres(composite):
    import datetime as dt

    await composite.runs.upsert_runs([_run(1, "c1"), _run(2, "c1")])
    await composite.scores.write_scores([_score(1, 0.1), _score(2)], [])
    since = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    reads = composite.reads  # the typed reads the read commands and the report make
    results = [
        await reads.report_summary(since, None),
        await reads.report_trend(since, "s", 3600),
        await reads.report_distribution(since, None, 10),
        await reads.report_worst(since, None, 5),
        await reads.report_transcripts(["run-1"], ["c1"], 3),
        await reads.runs(conversation_id="c1"),
        await reads.scores(since=since, all_columns=True),
        await reads.trace_runs(f"{1:032x}"),
        await reads.conversation_runs("c1"),
        await reads.decisions([("run", "run-1")]),
        await reads.report_errors(since, None, 5),
        await reads.ids_equal("c1"),
        await reads.ids_starting("RUN-"),
        await reads.score_target("score-1"),
        await reads.runs_of("conversation", "c1"),
        await reads.scores(label="pass", status="ok", agent="a*", about=("trace", f"{1:032x}"), scorer_id="s"),
        await reads.scores(about=("run", "run-2")),
        await reads.scores(about=("conversation", "c1")),
        await reads.runs(run_id="run-2", newest_first=True, limit=1),
    ]
    summary = results[0].dicts()
    assert summary[0]["n"] == 2 and summary[0]["ok"] == 2 and float(summary[0]["cost_usd"]) == 0.1
    assert [r[0] for r in results[5].rows] == ["run-1", "run-2"]
    # the run target's run, and the conversation's runs
    assert sorted((r[0], r[1]) for r in results[4].rows) == [
        ("conversation", "run-1"),
        ("conversation", "run-2"),
        ("run", "run-1"),
    ]
    assert results[11].rows == [("conversation", "c1")]
    assert results[12].rows == [("run", "run-1"), ("run", "run-2")]  # hex-like ids are matched in lower case
    assert results[13].dicts()[0]["run_id"] == "run-1"
    assert [r[0] for r in results[14].rows] == ["run-1", "run-2"]
    assert [r["id"] for r in results[15].dicts()] == []  # the scores carry no trace id, label or agent here
    assert [r["id"] for r in results[16].dicts()] == ["score-2"]
    assert [r[0] for r in results[18].rows] == ["run-2"] and not results[18].truncated


async def test_an_older_schema_is_upgraded_by_the_migrations_after_it(stores, pg_dsn):
    from tracescorer.store.duckdb.migrations import Migration
    from tracescorer.store.postgres.migrations import migrate

    a, _ = stores
    await a.upsert_runs([_run(1, "c1")])
    now, later = latest_version(), latest_version() + 1
    steps = (Migration(later, "a column", ("ALTER TABLE runs ADD COLUMN IF NOT EXISTS region text",)),)
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        assert await migrate(conn, "tracescorer", steps) == (now, later)
        assert await migrate(conn, "tracescorer", steps) == (later, later)  # nothing left to do
        cur = await conn.execute("SELECT run_id, region FROM tracescorer.runs")
        assert await cur.fetchall() == [("run-1", None)]  # the rows are kept
