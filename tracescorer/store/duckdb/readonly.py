"""The read-only query path: a statement guard, the connection config, and ``run_guarded``.

Two layers, so that neither alone has to be perfect:

1. :func:`check_statement` classifies the SQL with DuckDB's own parser
   (``extract_statements``, then ``json_serialize_sql`` to walk the syntax tree): exactly one
   plain SELECT, whose every table reference is one of the database's own tables or views (or a
   CTE in scope) and whose every table function is on a short list of pure ones (``range``,
   ``unnest``...). Writes, DDL, ATTACH, COPY, EXPORT/IMPORT, INSTALL/LOAD, SET/RESET, PRAGMA,
   CALL, EXPLAIN (EXPLAIN ANALYZE runs its statement), several statements, data-modifying
   CTEs (``WITH x AS (UPDATE … RETURNING *) SELECT …``: DuckDB parses the whole statement as a
   SELECT), file readers (``read_*``, ``glob``, ``'/path/file.csv'`` replacement scans) and
   ``query()`` are refused.
2. :data:`QUERY_CONFIG` makes DuckDB itself refuse file and network access, extension
   installs and configuration changes on a query connection (:func:`connect` opens a file with
   it, read-only), and :func:`run_guarded` runs the statement in a READ ONLY transaction.

Importing this module has no side effects; every function takes the connection to use.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb

from tracescorer.store.api import QueryResult
from tracescorer.store.duckdb import layout

__all__ = [
    "PURE_TABLE_FUNCTIONS",
    "QUERY_CONFIG",
    "QueryError",
    "QueryRefused",
    "QueryResult",
    "check_statement",
    "connect",
    "lock_down",
    "readable_tables",
    "run_guarded",
]

# What a query connection must have (DuckDB 2.0 option names). lock_configuration comes last in
# effect: nothing a statement says can turn the others back on.
QUERY_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
    "lock_configuration": True,
}

# Table functions that read nothing but their arguments and the database's own catalog.
PURE_TABLE_FUNCTIONS = frozenset(
    {
        "range",
        "generate_series",
        "unnest",
        "json_each",
        "json_tree",
        "duckdb_tables",
        "duckdb_views",
        "duckdb_columns",
        "pragma_table_info",
    }
)
_SCHEMAS_BROWSABLE = frozenset({"information_schema"})
# Table reference kinds that only combine or contain other references (walked further).
_CONTAINER_REFS = frozenset({"SUBQUERY", "JOIN", "EXPRESSION_LIST", "EMPTY", "EMPTY_FROM", "PIVOT"})
# The query nodes a read is made of; any other (UPDATE_QUERY_NODE, INSERT_QUERY_NODE,
# DELETE_QUERY_NODE, MERGE_INTO_QUERY_NODE... inside a CTE) is refused: default-deny, so a node
# kind a later DuckDB adds is refused until it is known to read only.
_QUERY_NODES = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"})


class QueryError(RuntimeError):
    """A query could not be run (bad SQL, timeout, DuckDB error); the message says why."""


class QueryRefused(QueryError):
    """The statement is not a plain read of the product's tables; the message says what was refused."""


def lock_down(con: duckdb.DuckDBPyConnection) -> None:
    """Apply :data:`QUERY_CONFIG` to a running database (after its span log is attached: ATTACH
    is file access); ``lock_configuration`` last. The connection draws no progress bar (its
    process's output is a log)."""
    con.execute("SET enable_progress_bar = false")
    for name, value in QUERY_CONFIG.items():
        con.execute(f"SET GLOBAL {name} = {str(value).lower() if isinstance(value, bool) else value!r}")


def connect(path: str | Path, config: dict[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """Open a store's database read-only, its span log attached, with :data:`QUERY_CONFIG`
    (fails while a daemon holds it); ``config``: further DuckDB settings (a memory limit, say)."""
    if not Path(path).exists():
        raise QueryError(f"database {path} does not exist")
    try:
        con = duckdb.connect(str(path), read_only=True, config=config or {})
    except duckdb.Error as exc:
        raise QueryError(f"cannot open {path} read-only: {exc}") from None
    try:
        layout.attach(con, path, read_only=True)
        layout.check_belonging(con, path)
        lock_down(con)
    except (duckdb.Error, layout.LayoutError) as exc:
        con.close()
        raise QueryError(f"cannot open {path} read-only: {exc}") from None
    return con


def readable_tables(con: duckdb.DuckDBPyConnection) -> frozenset[str]:
    """The tables and views of the database's main schema (lower-case names)."""
    rows = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' "
        "UNION SELECT view_name FROM duckdb_views() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND NOT internal"
    ).fetchall()
    return frozenset(str(r[0]).lower() for r in rows)


def check_statement(con: duckdb.DuckDBPyConnection, sql: str, tables: frozenset[str] | None = None) -> None:
    """Raise :class:`QueryRefused` unless ``sql`` is one SELECT over ``tables`` (default: the
    database's own, :func:`readable_tables`); :class:`QueryError` when it does not parse."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"invalid SQL: {exc}") from None
    if len(statements) != 1:
        raise QueryRefused(f"only one statement per query is allowed, got {len(statements)}")
    kind = statements[0].type
    if kind == duckdb.StatementType.EXPLAIN:
        raise QueryRefused("EXPLAIN is not allowed on the query path (EXPLAIN ANALYZE runs its statement)")
    if kind != duckdb.StatementType.SELECT:
        raise QueryRefused(f"only read statements (SELECT) are allowed, not {kind.name}")
    rows = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()
    tree: dict[str, Any] = json.loads(rows[0][0]) if rows else {"error": True, "error_message": "no syntax tree"}
    if tree.get("error"):
        raise QueryRefused(f"only plain SELECT statements are allowed ({tree.get('error_message', 'unsupported')})")
    allowed = readable_tables(con) if tables is None else tables
    statements_tree: list[dict[str, Any]] = tree.get("statements") or []
    for statement in statements_tree:
        _walk(statement.get("node"), allowed, frozenset())


def _cte_names(node: dict[str, Any]) -> Iterator[str]:
    cte_map = node.get("cte_map")
    entries = cte_map.get("map", []) if isinstance(cte_map, dict) else []
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("key"), str):
            yield entry["key"].lower()


def _walk(value: Any, tables: frozenset[str], ctes: frozenset[str]) -> None:
    """Check every table reference below ``value``; ``ctes`` are the CTE names in scope."""
    if isinstance(value, list):
        for item in value:
            _walk(item, tables, ctes)
        return
    if not isinstance(value, dict):
        return
    kind = value.get("type")
    if "class" not in value and isinstance(kind, str):
        if kind in _QUERY_NODES:
            ctes = ctes | frozenset(_cte_names(value))
        elif kind.endswith("_NODE"):
            what = kind.removesuffix("_NODE").removesuffix("_QUERY").replace("_", " ")
            raise QueryRefused(
                f"only plain SELECT statements are allowed, not one with {what} inside (a WITH clause that writes)"
            )
        elif kind == "BASE_TABLE":
            _check_table(value, tables, ctes)
        elif kind == "TABLE_FUNCTION":
            _check_table_function(value)
        elif kind == "SHOW_REF":
            _check_show(value, tables, ctes)
        elif kind not in _CONTAINER_REFS and _looks_like_table_ref(value):
            raise QueryRefused(f"table reference of kind {kind} is not allowed")
    for child in value.values():
        _walk(child, tables, ctes)


def _looks_like_table_ref(value: dict[str, Any]) -> bool:
    # Table references carry an alias and a sample clause; modifiers, CTE entries and literals do not.
    return "alias" in value and "sample" in value


def _check_table(ref: dict[str, Any], tables: frozenset[str], ctes: frozenset[str]) -> None:
    name = str(ref.get("table_name", ""))
    schema = str(ref.get("schema_name", "")).lower()
    catalog = str(ref.get("catalog_name", "")).lower()
    if not schema and not catalog and name.lower() in ctes:
        return
    if schema in _SCHEMAS_BROWSABLE and not catalog:
        return
    if catalog or schema not in ("", "main"):
        raise QueryRefused(
            f"{'.'.join(p for p in (catalog, schema, name) if p)!r}: only the database's own "
            "tables and views can be queried"
        )
    if name.lower() not in tables:
        hint = " (a file path: reading files is not allowed)" if "/" in name or "." in name else ""
        raise QueryRefused(
            f"{name!r} is not a table or view of this database{hint}; tables: {', '.join(sorted(tables)) or 'none'}"
        )


def _check_table_function(ref: dict[str, Any]) -> None:
    function = ref.get("function") or {}
    name = str(function.get("function_name", "")).lower()
    if function.get("catalog") or function.get("schema") or name not in PURE_TABLE_FUNCTIONS:
        raise QueryRefused(
            f"table function {name}() is not allowed (it may read files, the network or other "
            f"queries); allowed: {', '.join(sorted(PURE_TABLE_FUNCTIONS))}"
        )


def _check_show(ref: dict[str, Any], tables: frozenset[str], ctes: frozenset[str]) -> None:
    if ref.get("query") is not None:
        return  # DESCRIBE / SUMMARIZE of a query: the query itself is walked next
    name = str(ref.get("table_name", "")).strip('"').lower()
    if ref.get("show_type") == "SHOW_SPECIAL" and name == "tables":
        return
    if name not in tables and name not in ctes:
        raise QueryRefused(f"SHOW/DESCRIBE {name!r}: not a table or view of this database")


def run_guarded(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    *,
    max_rows: int,
    timeout_s: float,
    tables: frozenset[str] | None = None,
    params: Sequence[Any] = (),
) -> QueryResult:
    """Check ``sql`` (:func:`check_statement`) and run it (with ``?`` parameters) in a READ ONLY
    transaction on ``con``, returning at most ``max_rows`` rows; interrupted after ``timeout_s``."""
    check_statement(con, sql, tables)
    timer = threading.Timer(timeout_s, con.interrupt)
    timer.daemon = True
    timer.start()
    try:
        con.execute("BEGIN TRANSACTION READ ONLY")
        try:
            con.execute(sql, list(params)) if params else con.execute(sql)
            description = con.description or []
            fetched = con.fetchmany(max_rows + 1)
        finally:
            _rollback(con)
    except duckdb.InterruptException:
        raise QueryError(f"query timed out after {timeout_s:g}s") from None
    except duckdb.Error as exc:
        raise QueryError(f"query failed: {exc}") from None
    finally:
        timer.cancel()
    return QueryResult(
        columns=[d[0] for d in description],
        types=[str(d[1]) for d in description],
        rows=[tuple(r) for r in fetched[:max_rows]],
        truncated=len(fetched) > max_rows,
    )


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass  # nothing to roll back (the statement failed before the transaction began)
