"""The query path is read-only by construction: every refused kind of statement, through the real
CLI on the file (no daemon) and through the running daemon's ops API, leaves rows, tables and
files as they were, and files outside the database stay unreadable; the query route is on the
ops listener only."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import duckdb
import pytest
from support.daemon import DaemonProcess, config_dict, query_rows, wait_for
from support.otlp import agent_trace, span_exporter, tracer

from tracescorer.control import RemoteQueryError, remote_query, serve_info_path
from tracescorer.store.duckdb import readonly

SECRET = "s3cr3t-canary-7f1d"


def refused_statements(tmp: Path, db: Path) -> list[str]:
    secret = tmp / "secret.csv"
    state = serve_info_path(str(db))
    return [
        # writes and DDL
        "DELETE FROM spans",
        "INSERT INTO spans (trace_id, span_id) VALUES ('a', 'b')",
        "UPDATE spans SET name = 'x'",
        "CREATE TABLE planted (a INTEGER)",
        "CREATE VIEW planted_v AS SELECT 1",
        "DROP TABLE scores",
        "ALTER TABLE spans ADD COLUMN planted INTEGER",
        "TRUNCATE spans",
        # a WITH clause that writes: DuckDB parses the whole statement as a SELECT
        "WITH x AS (UPDATE spans SET name = 'x' RETURNING *) SELECT * FROM x",
        "WITH x AS (INSERT INTO spans (trace_id, span_id) VALUES ('a', 'b') RETURNING *) SELECT * FROM x",
        "WITH x AS (DELETE FROM spans RETURNING *) SELECT count(*) FROM x",
        f"WITH x AS (COPY spans TO '{tmp}/cte.csv') SELECT 1",
        # other databases, files, extensions, configuration
        f"ATTACH '{tmp}/other.duckdb' AS other",
        "DETACH other",
        f"COPY spans TO '{tmp}/out.csv'",
        f"COPY (SELECT * FROM spans) TO '{tmp}/out2.csv'",
        f"EXPORT DATABASE '{tmp}/exported'",
        f"IMPORT DATABASE '{tmp}/exported'",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET memory_limit = '1GB'",
        "RESET memory_limit",
        "SET enable_external_access = true",
        "PRAGMA enable_profiling",
        "CALL pragma_version()",
        "CHECKPOINT",
        # EXPLAIN ANALYZE runs its statement: refused whatever it wraps
        "EXPLAIN ANALYZE DELETE FROM spans",
        "EXPLAIN ANALYZE INSERT INTO spans (trace_id, span_id) VALUES ('a', 'b')",
        "EXPLAIN ANALYZE CREATE TABLE planted AS SELECT 1",
        f"EXPLAIN ANALYZE COPY (SELECT 1) TO '{tmp}/explained.csv'",
        f"EXPLAIN ANALYZE ATTACH '{tmp}/other.duckdb'",
        "EXPLAIN ANALYZE SELECT 1",
        # several statements
        "SELECT 1; DELETE FROM spans",
        "SELECT 1; SELECT 2",
        # table functions and replacement scans that read files, the network or other queries
        f"SELECT * FROM read_text('{secret}')",
        f"SELECT * FROM read_csv('{secret}')",
        f"SELECT * FROM read_csv_auto('{secret}')",
        f"SELECT * FROM read_json_auto('{secret}')",
        f"SELECT * FROM read_blob('{state}')",
        f"SELECT * FROM read_parquet('{tmp}/x.parquet')",
        f"SELECT * FROM glob('{tmp}/*')",
        f"SELECT * FROM '{secret}'",
        f'SELECT * FROM "{secret}"',
        f"SELECT * FROM sniff_csv('{secret}')",
        "SELECT * FROM read_csv('https://example.invalid/x.csv')",
        "SELECT * FROM query('DELETE FROM spans')",
        "SELECT * FROM query('SELECT 1')",
        "SELECT * FROM query_table('spans')",
        f"SELECT (SELECT count(*) FROM read_text('{secret}')) AS n",
        f"SELECT * FROM spans WHERE name IN (SELECT content FROM read_text('{secret}'))",
        f"WITH leaked AS (SELECT * FROM read_text('{secret}')) SELECT * FROM leaked",
        f"SELECT * FROM spans, read_text('{secret}')",
        "SELECT * FROM duckdb_settings()",
        "SELECT * FROM duckdb_secrets()",
        "SELECT * FROM system.main.duckdb_settings()",
        "SELECT * FROM temp.main.anything",
    ]


def _fingerprint(db: Path) -> tuple:
    con = readonly.connect(db)
    try:
        tables = con.execute(
            "SELECT database_name, table_name, column_count FROM duckdb_tables() ORDER BY 1, 2"
        ).fetchall()
        counts = tuple(con.execute(f'SELECT count(*) FROM "{d}"."{t}"').fetchone()[0] for d, t, _ in tables)
        names = con.execute("SELECT list_sort(list(name)) FROM spans").fetchone()[0]
    finally:
        con.close()
    return tuple(tables), counts, tuple(names or ())


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A database with one agent trace, its run and its span rows, written by the real daemon
    (stopped afterwards)."""
    tmp = tmp_path_factory.mktemp("guard")
    (tmp / "secret.csv").write_text(f"token\n{SECRET}\n")
    daemon = DaemonProcess(tmp, config_dict(tmp, store={"spans": "agent"}, assembly={"idle_s": 0.2}))
    daemon.start()
    try:
        with tracer(span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint)) as t:
            agent_trace(t)
        wait_for(lambda: query_rows(daemon.db_path, "SELECT run_id FROM runs"), 20, what="the run assembled")
        spans = "SELECT count(*) AS n FROM spans"
        wait_for(lambda: query_rows(daemon.db_path, spans) == [{"n": 4}], 20, what="the span rows")
    finally:
        assert daemon.stop() == 0, daemon.log()
    return tmp, daemon


def _no_side_effects(tmp: Path, before: set[str], out: str) -> None:
    assert SECRET not in out
    assert {p.name for p in tmp.iterdir()} == before, "a refused statement created a file"


@pytest.mark.parametrize("mode", ["file", "daemon"])
def test_every_refused_kind_is_refused_without_side_effects(stored, mode):
    tmp, daemon = stored
    db = Path(daemon.db_path)
    before = _fingerprint(db)
    if mode == "daemon":
        daemon.start()
    try:
        files = {p.name for p in tmp.iterdir()}
        accepted = []
        for n, sql in enumerate(refused_statements(tmp, db)):
            if mode == "file":  # every one through the guard the CLI uses, on the file itself
                con = readonly.connect(db)
                try:
                    answer = repr(readonly.run_guarded(con, sql, max_rows=10, timeout_s=10))
                    accepted.append(f"{sql!r} through the file guard: {answer[:200]}")
                except readonly.QueryError as exc:
                    answer = str(exc)
                finally:
                    con.close()
            else:  # every one through the ops API
                try:
                    answer = repr(remote_query(daemon.info, sql, max_rows=10))
                    accepted.append(f"{sql!r} through the ops API: {answer[:200]}")
                except RemoteQueryError as exc:
                    answer = str(exc)
            _no_side_effects(tmp, files, answer)
            # and the real CLI, a process each: every fourth statement, half of them on the file
            # and half through the daemon (each mode's CLI sees 7 or 8); it says what the guard said
            if n % 8 == (0 if mode == "file" else 4):
                result = daemon.cli("query", sql, check=False)
                if result.returncode != 1 or result.stderr != f"Error: {answer}\n":
                    accepted.append(
                        f"{sql!r}: exit {result.returncode}, {result.stdout[:200]!r} {result.stderr[:200]!r}"
                    )
                _no_side_effects(tmp, files, result.stdout + result.stderr)
        assert not accepted, "not refused:\n" + "\n".join(accepted)
        # a SELECT over the product's tables still works, with the row limit
        rows = json.loads(daemon.cli("query", "SELECT name FROM spans ORDER BY name", "--format", "json").stdout)
        assert [r["name"] for r in rows] == [
            "chat gpt-4o-mini",
            "chat gpt-4o-mini",
            "execute_tool get_weather",
            "invoke_agent weather",
        ]
        if mode == "daemon":  # the OTLP port serves no query route, whatever the token
            req = urllib.request.Request(
                daemon.http_url + "/api/v1/query",
                data=json.dumps({"sql": "SELECT 1"}).encode(),
                method="POST",
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {daemon.info.api_token}"},
            )
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(req, timeout=10)
            assert info.value.code == 404
    finally:
        if mode == "daemon":
            assert daemon.stop() == 0, daemon.log()
    assert _fingerprint(db) == before


def test_refusals_name_what_was_refused(stored):
    """Through the guard the CLI uses on the file (the CLI prints its message: the test above)."""
    tmp, daemon = stored
    cases = {
        "DELETE FROM spans": "only read statements (SELECT) are allowed, not DELETE",
        "WITH x AS (DELETE FROM spans RETURNING *) SELECT * FROM x": "not one with DELETE inside",
        "EXPLAIN ANALYZE SELECT 1": "EXPLAIN is not allowed",
        "SELECT 1; SELECT 2": "only one statement per query",
        f"SELECT * FROM read_text('{tmp}/secret.csv')": "table function read_text() is not allowed",
        f"SELECT * FROM '{tmp}/secret.csv'": "reading files is not allowed",
    }
    for sql, message in cases.items():
        con = readonly.connect(daemon.db_path)
        try:
            with pytest.raises(readonly.QueryError) as refused:
                readonly.run_guarded(con, sql, max_rows=10, timeout_s=10)
        finally:
            con.close()
        assert message in str(refused.value), (sql, str(refused.value))


def test_reads_that_stay_allowed(stored):
    _tmp, daemon = stored
    queries = {
        "WITH r AS (SELECT * FROM runs) SELECT count(*) AS n FROM r": [{"n": 1}],
        "SELECT count(*) AS n FROM range(10) t(i) JOIN spans ON true": [{"n": 40}],
        "SELECT count(*) AS n FROM (SELECT unnest([1, 2, 3]))": [{"n": 3}],
        "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = 'scores'": [{"n": 1}],
        "SELECT 1 AS n UNION ALL SELECT count(*) FROM scores ORDER BY n DESC": [{"n": 1}, {"n": 0}],
    }
    for sql, expected in queries.items():
        assert query_rows(daemon.db_path, sql) == expected, sql
    described = daemon.cli("query", "DESCRIBE spans", "--format", "jsonl").stdout.splitlines()
    assert json.loads(described[0])["column_name"] == "trace_id"


def test_query_connection_config_refuses_files_by_itself(tmp_path):
    """The second layer: with the guard bypassed, DuckDB itself refuses files and config changes."""
    db = tmp_path / "x.duckdb"
    duckdb.connect(str(db)).execute("CREATE TABLE t AS SELECT 1 AS a").close()
    (tmp_path / "secret.txt").write_text(SECRET)
    con = readonly.connect(db)
    try:
        for sql in (
            f"SELECT * FROM read_text('{tmp_path}/secret.txt')",
            f"COPY t TO '{tmp_path}/o.csv'",
            "SET enable_external_access = true",
            "INSERT INTO t VALUES (2)",
            f"ATTACH '{tmp_path}/y.duckdb'",
        ):
            with pytest.raises(duckdb.Error):
                con.execute(sql)
        assert con.execute("SELECT a FROM t").fetchall() == [(1,)]
    finally:
        con.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.txt", "x.duckdb"]
