"""The read-only query path in postgres mode: which engine a statement goes to, and running it.

Span-log tables (``spans``, ``log_records``, ``assembled_traces``) stay in each daemon's DuckDB
file; every other product table is in PostgreSQL. :func:`route` sends a statement over span-log
tables to the DuckDB query path (its own guard) and refuses one that mixes both. A statement for
PostgreSQL passes three layers, so that no one of them has to be perfect:

1. the DuckDB parser guard (:func:`tracescorer.store.duckdb.readonly.check_statement`, one plain SELECT
   over the PostgreSQL tables) plus a walk of its syntax tree refusing functions with side
   effects or file/network access (``pg_read_file``, ``lo_*``, ``dblink*``, ``set_config``,
   ``query_to_xml`` and other ``pg_*`` administration functions);
2. a READ ONLY transaction with ``statement_timeout``, rolled back afterwards, and a
   ``search_path`` of the store's schema only;
3. ``SET ROLE`` to ``store.postgres.query_role``: a role with SELECT on the product tables and
   nothing else (no superuser, no ``pg_read_server_files``, no large-object or COPY rights).

:func:`route` and :func:`check` need DuckDB's parser: the daemon runs them in its store process,
the CLI in its own process. Rows come back at most ``max_rows`` at a time from a server-side
cursor, so a large result never sits in memory whole.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from tracescorer.store.api import QueryResult, ReadOnlyViolation, StoreClosed, StoreError
from tracescorer.store.postgres.bulk import qmark_to_pyformat
from tracescorer.store.postgres.schema import QUERYABLE
from tracescorer.store.postgres.tx import Tx

SPAN_LOG, RESULTS = "span_log", "results"
SPAN_LOG_TABLES = frozenset({"spans", "log_records", "skipped_traces", "assembled_traces"})

# administration functions a query must not reach (the query role lacks most rights anyway)
_DENIED = frozenset(
    {
        "set_config",
        "current_setting",
        "txid_current",
        "nextval",
        "setval",
        "currval",
        "lastval",
        "dblink",
        "query_to_xml",
        "query_to_xml_and_xmlschema",
        "query_to_xmlschema",
        "cursor_to_xml",
        "cursor_to_xmlschema",
        "table_to_xml",
        "table_to_xml_and_xmlschema",
        "schema_to_xml",
        "database_to_xml",
        "brin_summarize_new_values",
        "brin_summarize_range",
        "brin_desummarize_range",
        "gin_clean_pending_list",
    }
)
_DENIED_PREFIXES = ("pg_", "lo_", "dblink", "xmlexists", "binary_upgrade_")
_ALLOWED_PG = frozenset({"pg_typeof", "pg_column_size", "pg_size_pretty", "pg_size_bytes"})


class Refused(Exception):
    """The statement must not run (the message says why)."""


def _tree(con: Any, sql: str) -> dict[str, Any]:
    rows = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()
    tree: dict[str, Any] = json.loads(rows[0][0]) if rows else {"error": True}
    return tree


def _walk(value: Any, tables: set[str], functions: set[str]) -> None:
    if isinstance(value, list):
        for item in value:
            _walk(item, tables, functions)
        return
    if not isinstance(value, dict):
        return
    if value.get("class") == "FUNCTION" and isinstance(value.get("function_name"), str):
        functions.add(value["function_name"].lower())
    elif "class" not in value and value.get("type") == "BASE_TABLE" and not value.get("schema_name"):
        tables.add(str(value.get("table_name", "")).lower())
    for child in value.values():
        _walk(child, tables, functions)


def _cte_names(value: Any, out: set[str]) -> None:
    if isinstance(value, list):
        for item in value:
            _cte_names(item, out)
    elif isinstance(value, dict):
        cte_map = value.get("cte_map")
        if isinstance(cte_map, dict):
            for entry in cte_map.get("map", []):
                if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                    out.add(entry["key"].lower())
        for child in value.values():
            _cte_names(child, out)


def references(con: Any, sql: str) -> tuple[set[str], set[str]]:
    """The table names (CTEs left out) and the function names a statement uses; empty when it does
    not parse (the guard then says why)."""
    tree = _tree(con, sql)
    if tree.get("error"):
        return set(), set()
    tables: set[str] = set()
    functions: set[str] = set()
    ctes: set[str] = set()
    _walk(tree.get("statements"), tables, functions)
    _cte_names(tree.get("statements"), ctes)
    return tables - ctes, functions


def route(con: Any, sql: str) -> str:
    """:data:`SPAN_LOG` for a statement over span-log tables only, :data:`RESULTS` otherwise;
    raises :class:`Refused` for one that mixes them."""
    tables, _ = references(con, sql)
    local = tables & SPAN_LOG_TABLES
    if local and tables - SPAN_LOG_TABLES:
        raise Refused(
            f"{', '.join(sorted(local))} {'is a' if len(local) == 1 else 'are'} per-daemon span-log table"
            f"{'' if len(local) == 1 else 's'} (this daemon's DuckDB file) and {', '.join(sorted(tables - local))} "
            "live in PostgreSQL: one query cannot read both; query them separately"
        )
    return SPAN_LOG if local else RESULTS


def check(con: Any, sql: str) -> None:
    """The guard for a statement that runs on PostgreSQL (layer 1 of the module docstring)."""
    from tracescorer.store.duckdb import readonly

    try:
        readonly.check_statement(con, sql, frozenset(QUERYABLE))
    except readonly.QueryRefused as exc:
        message = str(exc)
        if "is not a table or view" in message:
            message += f" (span-log tables, per daemon: {', '.join(sorted(SPAN_LOG_TABLES))})"
        raise Refused(message) from None
    except readonly.QueryError as exc:
        raise Refused(str(exc)) from None
    _, functions = references(con, sql)
    for name in sorted(functions):
        if name in _DENIED or (name.startswith(_DENIED_PREFIXES) and name not in _ALLOWED_PG):
            raise Refused(
                f"function {name}() is not allowed on the query path (administration, file or "
                "network access, or side effects)"
            )


def prepare(sql: str, params: Sequence[Any]) -> str:
    return qmark_to_pyformat(sql) if params else sql


def setup_statements(*, timeout_s: float, schema: str, role: str | None) -> list[tuple[str, list[Any]]]:
    """What a query transaction runs before the statement (layers 2 and 3)."""
    out: list[tuple[str, list[Any]]] = [
        ("SET TRANSACTION READ ONLY", []),
        ("SELECT set_config('statement_timeout', %s, true)", [str(max(1, int(timeout_s * 1000)))]),
        ("SELECT set_config('search_path', %s, true)", [quote_ident(schema)]),
    ]
    if role:
        out.append(("SELECT set_config('role', %s, true)", [role]))
    return out


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def result(description: Sequence[Any], types: Any, fetched: Sequence[Sequence[Any]], max_rows: int) -> QueryResult:
    names = []
    for d in description:
        info = types.get(d.type_code)
        names.append(info.name if info is not None else str(d.type_code))
    return QueryResult(
        columns=[d.name for d in description],
        types=names,
        rows=[tuple(r) for r in fetched[:max_rows]],
        truncated=len(fetched) > max_rows,
    )


async def run_async(
    conn: Any, sql: str, *, max_rows: int, timeout_s: float, schema: str, role: str | None, params: Sequence[Any] = ()
) -> QueryResult:
    """Run a checked statement on ``conn`` (a psycopg AsyncConnection outside a transaction)."""
    try:
        for statement, args in setup_statements(timeout_s=timeout_s, schema=schema, role=role):
            await conn.execute(statement, args)
        cur = conn.cursor(name="tracescorer_query")
        try:
            await cur.execute(prepare(sql, params), list(params) if params else None)
            description = cur.description or []
            fetched = await cur.fetchmany(max_rows + 1)
        finally:
            await cur.close()
        return result(description, conn.adapters.types, fetched, max_rows)
    finally:
        await conn.rollback()


def run_sync(
    conn: Any, sql: str, *, max_rows: int, timeout_s: float, schema: str, role: str | None, params: Sequence[Any] = ()
) -> QueryResult:
    """:func:`run_async` for the CLI (a psycopg Connection)."""
    try:
        for statement, args in setup_statements(timeout_s=timeout_s, schema=schema, role=role):
            conn.execute(statement, args)
        with conn.cursor(name="tracescorer_query") as cur:
            cur.execute(prepare(sql, params), list(params) if params else None)
            description = cur.description or []
            fetched = cur.fetchmany(max_rows + 1)
        return result(description, conn.adapters.types, fetched, max_rows)
    finally:
        conn.rollback()


def query_sync(
    dsn: str,
    sql: str,
    *,
    schema: str,
    role: str | None,
    max_rows: int,
    timeout_s: float,
    connect_timeout_s: float = 10.0,
    params: Sequence[Any] = (),
) -> QueryResult:
    """A read command's query straight on PostgreSQL (no daemon running): connect, run, close.
    The statement must have passed :func:`check`. Raises psycopg errors."""
    import psycopg
    from psycopg.types.string import TextLoader

    with psycopg.connect(dsn, connect_timeout=int(connect_timeout_s)) as conn:
        conn.adapters.register_loader("json", TextLoader)
        conn.adapters.register_loader("jsonb", TextLoader)
        usable = None
        if role:
            row = conn.execute(
                "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = %s) AND pg_has_role(current_user, %s, 'MEMBER')",
                [role, role],
            ).fetchone()
            usable = role if row and row[0] else None
            conn.rollback()
        return run_sync(conn, sql, max_rows=max_rows, timeout_s=timeout_s, schema=schema, role=usable, params=params)


class DirectQueries:
    """:class:`~tracescorer.store.api.QueryStore` straight on PostgreSQL, for a read command when no
    daemon runs: a connection per query, in a worker thread. Statements must have passed
    :func:`check` (the :class:`~tracescorer.store.router.QueryRouter` does it)."""

    def __init__(self, dsn: str, *, schema: str, role: str | None, connect_timeout_s: float) -> None:
        self._dsn = dsn
        self._schema = schema
        self._role = role
        self._connect_timeout_s = connect_timeout_s

    async def query(self, sql: str, *, max_rows: int, timeout_s: float, params: Sequence[Any] = ()) -> QueryResult:
        return await asyncio.to_thread(self._query, sql, max_rows, timeout_s, params)

    def _query(self, sql: str, max_rows: int, timeout_s: float, params: Sequence[Any]) -> QueryResult:
        import psycopg

        from tracescorer.config import mask_dsn

        try:
            return query_sync(
                self._dsn,
                sql,
                schema=self._schema,
                role=self._role,
                max_rows=max_rows,
                timeout_s=timeout_s,
                connect_timeout_s=self._connect_timeout_s,
                params=params,
            )
        except psycopg.errors.QueryCanceled:
            raise StoreError(f"query timed out after {timeout_s:g}s") from None
        except psycopg.OperationalError as exc:
            raise StoreError(f"cannot query PostgreSQL {mask_dsn(self._dsn)}: {str(exc).strip()}") from None
        except psycopg.Error as exc:
            raise StoreError(f"query failed: {str(exc).strip()}") from None


class QueryPart(Tx):
    """:class:`~tracescorer.store.api.QueryStore` in PostgreSQL (statements already checked)."""

    async def query(self, sql: str, *, max_rows: int, timeout_s: float, params: Sequence[Any] = ()) -> QueryResult:
        """Run an already checked statement (:func:`tracescorer.store.postgres.query.check`) read-only."""
        import psycopg

        if self._pool is None or self._closing:
            raise StoreClosed("PostgreSQL store is not open")
        try:
            async with self._pool.connection() as conn:
                return await run_async(
                    conn,
                    sql,
                    max_rows=max_rows,
                    timeout_s=timeout_s,
                    schema=self.schema,
                    role=self._query_role,
                    params=params,
                )
        except psycopg.errors.QueryCanceled:
            raise StoreError(f"query timed out after {timeout_s:g}s") from None
        except psycopg.errors.InsufficientPrivilege as exc:
            raise ReadOnlyViolation(f"refused by PostgreSQL: {str(exc).strip()}") from None
        except psycopg.errors.ReadOnlySqlTransaction as exc:
            raise ReadOnlyViolation(f"refused by PostgreSQL: {str(exc).strip()}") from None
        except psycopg.Error as exc:
            raise StoreError(f"query failed: {str(exc).strip()}") from None
