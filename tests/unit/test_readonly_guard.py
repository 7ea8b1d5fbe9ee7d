"""The statement guard of store/readonly.py on its own: what passes, what is refused and why,
CTE scoping (a CTE name never lends its permission outside its query), and the row limit."""

from __future__ import annotations

import duckdb
import pytest

from tracescorer.store.duckdb.readonly import QueryError, QueryRefused, check_statement, connect, run_guarded


@pytest.fixture
def con(tmp_path):
    path = tmp_path / "g.duckdb"
    w = duckdb.connect(str(path))
    w.execute("CREATE TABLE spans AS SELECT range AS i FROM range(20)")
    w.execute("CREATE VIEW recent AS SELECT * FROM spans WHERE i > 10")
    w.close()
    c = connect(path)
    yield c
    c.close()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM spans",
        "select count(*) from SPANS s join Recent r on s.i = r.i",
        "WITH x AS (SELECT * FROM spans) SELECT * FROM x",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r",
        "WITH a AS (SELECT 1 AS v) SELECT * FROM (SELECT * FROM a) JOIN spans ON true",
        "SELECT * FROM spans WHERE i IN (SELECT i FROM recent)",
        "FROM spans SELECT i",
        "SELECT * FROM range(3)",
        "SELECT * FROM unnest([1, 2])",
        "VALUES (1), (2)",
        "DESCRIBE spans",
        "SUMMARIZE spans",
        "SHOW TABLES",
        "SELECT * FROM information_schema.columns",
    ],
)
def test_reads_pass(con, sql):
    check_statement(con, sql)


@pytest.mark.parametrize(
    "sql,message",
    [
        ("SELECT * FROM (WITH q AS (SELECT 1) SELECT * FROM q), q", "'q' is not a table or view"),
        (
            "WITH q AS (SELECT 1) SELECT * FROM q UNION ALL SELECT * FROM (SELECT * FROM '/etc/hostname')",
            "reading files is not allowed",
        ),
        ("SELECT * FROM spans WHERE EXISTS (FROM glob('/*'))", "table function glob()"),
        ("SELECT [x FOR x IN (SELECT i FROM read_csv('/etc/passwd'))]", "table function read_csv()"),
        ("SELECT * FROM main.main.spans", "only the database's own tables"),
        ("PREPARE p AS SELECT 1", "not PREPARE"),
        ("EXECUTE p", "not EXECUTE"),
        ("EXPLAIN SELECT 1", "EXPLAIN is not allowed"),
        ("SELECT 1;;SELECT 2", "only one statement"),
    ],
)
def test_refused_with_the_reason(con, sql, message):
    with pytest.raises(QueryRefused) as info:
        check_statement(con, sql)
    assert message in str(info.value)


def test_bad_sql_is_a_query_error_not_a_refusal(con):
    with pytest.raises(QueryError) as info:
        check_statement(con, "SELEC 1")
    assert not isinstance(info.value, QueryRefused) and "invalid SQL" in str(info.value)


def test_row_limit_and_read_only_transaction(con):
    result = run_guarded(con, "SELECT i FROM spans ORDER BY i", max_rows=5, timeout_s=10)
    assert result.rows == [(0,), (1,), (2,), (3,), (4,)] and result.truncated and result.columns == ["i"]
    assert run_guarded(con, "SELECT count(*) FROM spans", max_rows=5, timeout_s=10).rows == [(20,)]


def test_timeout_interrupts(con):
    with pytest.raises(QueryError, match="timed out after 0.2s"):
        run_guarded(con, "SELECT count(*) FROM range(1000000000000) a", max_rows=1, timeout_s=0.2)
