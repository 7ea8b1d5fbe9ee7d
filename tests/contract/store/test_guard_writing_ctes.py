"""The statement guard refuses a WITH clause that writes (DuckDB parses ``WITH x AS (UPDATE …
RETURNING *) SELECT …`` as a SELECT) by itself, on both engines' query paths: the refusal is the
guard's, not the READ ONLY transaction's, and nothing changed."""

from __future__ import annotations

import time

import duckdb
import pytest

from tracescorer.config import Settings
from tracescorer.lifecycle import Stages
from tracescorer.metrics import Metrics
from tracescorer.records.scores import ScoreRecord
from tracescorer.store.api import ReadOnlyViolation
from tracescorer.store.duckdb import DuckDBStore
from tracescorer.store.duckdb.readonly import QueryRefused, check_statement
from tracescorer.store.factory import build_stores

WRITING = {
    "WITH x AS (UPDATE scores SET score = 0 RETURNING *) SELECT * FROM x": "UPDATE",
    "WITH x AS (INSERT INTO scores (id, scorer_id) VALUES ('x', 'y') RETURNING *) SELECT * FROM x": "INSERT",
    "WITH x AS (DELETE FROM scores RETURNING id) SELECT * FROM x": "DELETE",
    "WITH k AS (SELECT 1), x AS MATERIALIZED (DELETE FROM scores RETURNING id) SELECT count(*) FROM x": "DELETE",
    "SELECT * FROM (WITH x AS (DELETE FROM scores RETURNING id) SELECT * FROM x) AS inner_q": "DELETE",
    "SELECT (WITH x AS (UPDATE scores SET score = 2 RETURNING score) SELECT max(score) FROM x) AS m": "UPDATE",
    "WITH x AS (COPY scores TO '/tmp/tracescorer-guard-copy.csv') SELECT 1": "COPY",
}
MESSAGE = "only plain SELECT statements are allowed, not one with {} inside"


def _score(i: int) -> ScoreRecord:
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
        reason="fine",
        status="ok",
    )


@pytest.mark.parametrize("sql", list(WRITING))
def test_the_guard_refuses_a_with_clause_that_writes(sql):
    con = duckdb.connect()
    con.execute("CREATE TABLE scores (id VARCHAR, scorer_id VARCHAR, score DOUBLE)")
    with pytest.raises(QueryRefused, match=MESSAGE.format(WRITING[sql])):
        check_statement(con, sql)
    # reads with CTEs still pass
    check_statement(con, "WITH x AS (SELECT * FROM scores) SELECT * FROM x")
    check_statement(con, "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r")


async def test_duckdb_query_path_refuses_them_by_the_guard(tmp_path):
    store = DuckDBStore(tmp_path / "g.duckdb")
    await store.start()
    try:
        await store.write_scores([_score(1)], [])
        for sql, what in WRITING.items():
            with pytest.raises(ReadOnlyViolation, match=MESSAGE.format(what)):
                await store.query(sql, max_rows=10, timeout_s=10)
        result = await store.query("SELECT id, score FROM scores", max_rows=10, timeout_s=10)
        assert result.rows == [("score-1", 1.0)]
    finally:
        await store.stop()


@pytest.fixture
async def composite(pg_dsn, tmp_path):
    settings = {"store": {"path": str(tmp_path / "span.duckdb"), "backend": "postgres", "postgres": {"dsn": pg_dsn}}}
    stores = build_stores(Settings.model_validate(settings), Metrics(), owner="q", maintenance=False)
    stages = Stages(lambda: time.monotonic() + 30)
    for component in stores.components:
        await stages.enter(component)
    await stores.scores.write_scores([_score(1)], [])
    yield stores
    await stages.aclose()


async def test_postgres_query_path_refuses_them_by_the_guard(composite):
    for sql, what in WRITING.items():
        # the guard's own message: PostgreSQL's READ ONLY transaction never sees the statement
        with pytest.raises(ReadOnlyViolation, match=MESSAGE.format(what)):
            await composite.queries.query(sql, max_rows=10, timeout_s=5)
    result = await composite.queries.query("SELECT id, score FROM scores", max_rows=10, timeout_s=5)
    assert result.rows == [("score-1", 1.0)]
