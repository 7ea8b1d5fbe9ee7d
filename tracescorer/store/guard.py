"""Read-only queries on the daemon's database: what a query connection may do, and running one.

The database a daemon holds is opened with :data:`LOCKDOWN`, so DuckDB itself refuses file and
network access, extension loading and configuration changes; statements are classified by
DuckDB's own parser and only a single plain read runs.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import duckdb

from tracescorer.store.base import QueryResult

#: DuckDB settings of every connection the daemon or the CLI opens (set at connect time).
LOCKDOWN: dict[str, Any] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "lock_configuration": True,
}

_READ_STATEMENTS = frozenset({duckdb.StatementType.SELECT})


class QueryRefused(Exception):
    """The statement is not a plain read (``kind`` names the store error to raise)."""

    def __init__(self, message: str, kind: str = "ReadOnlyViolation") -> None:
        super().__init__(message)
        self.kind = kind


def check_read_only(con: Any, sql: str) -> None:
    """Raise :class:`QueryRefused` unless ``sql`` is exactly one plain read statement."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryRefused(f"invalid SQL: {exc}", "StoreError") from None
    if len(statements) != 1:
        raise QueryRefused(f"expected exactly one statement, got {len(statements)}")
    kind = statements[0].type
    if kind not in _READ_STATEMENTS:
        raise QueryRefused(f"only read statements are allowed, not {kind.name}")


def run_query(con: Any, sql: str, *, max_rows: int, timeout_s: float, params: Sequence[Any] = ()) -> QueryResult:
    """Validate and run a read statement (with ``?`` parameters); interrupt it after ``timeout_s``."""
    check_read_only(con, sql)
    timer = threading.Timer(timeout_s, con.interrupt)
    timer.daemon = True
    timer.start()
    try:
        con.execute(sql, list(params)) if params else con.execute(sql)
        description = con.description or []
        fetched = con.fetchmany(max_rows + 1)
    except duckdb.InterruptException:
        raise QueryRefused(f"query timed out after {timeout_s:g}s", "StoreError") from None
    except duckdb.Error as exc:
        raise QueryRefused(f"query failed: {exc}", "StoreError") from None
    finally:
        timer.cancel()
    return QueryResult(
        columns=[d[0] for d in description],
        types=[str(d[1]) for d in description],
        rows=[tuple(r) for r in fetched[:max_rows]],
        truncated=len(fetched) > max_rows,
    )
