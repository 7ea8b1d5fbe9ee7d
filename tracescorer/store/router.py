"""One read-only query path for the ops API and the read commands, in both store modes.

In duckdb mode a statement goes to the DuckDB file (its guard: :mod:`tracescorer.store.duckdb.readonly`).
In postgres mode :class:`QueryRouter` sends a statement over the span-log tables (``spans``,
``log_records``, ``assembled_traces``: each daemon's own DuckDB file) there, and every other
statement to PostgreSQL after the guard of :mod:`tracescorer.store.postgres.query`; one that
mixes both is refused. Classifying needs DuckDB's parser: the daemon runs :func:`classify` in its
store process, a read command in its own process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from tracescorer.store.api import QueryResult, QueryStore, ReadOnlyViolation, StoreError

#: Where a statement goes: the span log, the results, or nowhere (``refused`` / ``error``, and why).
Route = tuple[str, str | None]


def classify(con: Any, sql: str) -> Route:
    """(``span_log`` | ``results``, None) or (``refused`` | ``error``, why); ``con`` is any DuckDB
    connection (its parser only)."""
    from tracescorer.store.duckdb import readonly
    from tracescorer.store.postgres import query as pg_query

    try:
        where = pg_query.route(con, sql)
        if where == pg_query.RESULTS:
            pg_query.check(con, sql)
        return where, None
    except pg_query.Refused as exc:
        return "refused", str(exc)
    except readonly.QueryError as exc:
        return "error", str(exc)


class QueryRouter:
    """A :class:`~tracescorer.store.api.QueryStore` over a span log and results in different
    engines (see the module docstring)."""

    def __init__(
        self, classify: Callable[[str], Awaitable[Route]], *, span_log: QueryStore, results: QueryStore
    ) -> None:
        self._classify = classify
        self._span_log = span_log
        self._results = results

    async def query(self, sql: str, *, max_rows: int, timeout_s: float, params: Sequence[Any] = ()) -> QueryResult:
        where, why = await self._classify(sql)
        if where == "refused":
            raise ReadOnlyViolation(why or "refused")
        if where == "error":
            raise StoreError(why or "invalid SQL")
        target = self._span_log if where == "span_log" else self._results
        return await target.query(sql, max_rows=max_rows, timeout_s=timeout_s, params=params)
