"""Telemetry the database refuses for its values: stored by halves until the refused rows are found.

A telemetry job whose rows cannot be stored (a value out of range, a bad type) is not failed
whole: its rows are committed half by half, the good ones stored, the bad ones reported back to
the client as rejected with the first error.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import duckdb
import pyarrow as pa

from tracescorer.store.duckdb import appends, feedmarks

Connection = duckdb.DuckDBPyConnection

# Exceptions that say "this data cannot be stored" (the client's fault), not "the database is
# unwell" (retry later).
DATA_ERRORS: tuple[type[BaseException], ...] = (
    duckdb.ConversionException,
    duckdb.OutOfRangeException,
    duckdb.InvalidInputException,
    duckdb.ConstraintException,
    duckdb.TypeMismatchException,
    pa.ArrowInvalid,
    pa.ArrowTypeError,
    OverflowError,
    TypeError,
    UnicodeError,
)


class Rejects:
    """A mixin of :class:`~tracescorer.store.duckdb.engine.Engine`."""

    _con: Connection
    _commit_id: int
    _commits: Any
    _reply: Callable[[int, bool, Any, dict[str, Any]], None]

    def _claim_log(self) -> str:
        raise NotImplementedError

    def _release_log(self) -> None:
        raise NotImplementedError

    def _fail(self, job: Any, exc: BaseException) -> None:
        raise NotImplementedError

    def _meta(self) -> dict[str, Any]:
        raise NotImplementedError

    @staticmethod
    def _rollback(con: Connection) -> None:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass

    def _isolate(self, job: Any) -> None:
        """Store the rows of a telemetry job that can be stored, one half at a time; report the
        rest as rejected (with the first error)."""
        span_rows, log_rows, skipped_rows, consumer = job.payload
        errors: list[str] = []
        times: list[float] = []
        stored = 0
        try:
            for rows, table_of, insert in (
                (span_rows, appends.span_table, appends.insert_spans),
                (log_rows, appends.log_table, appends.insert_logs),
            ):
                if rows:
                    stored += self._store_halves(rows, table_of, insert, errors, times, consumer)
            if skipped_rows:  # bookkeeping beside the items, not items of the request
                self._store_halves(skipped_rows, appends.skipped_table, appends.insert_skipped, errors, times, consumer)
        except duckdb.Error as exc:  # not the data: the database is failing
            self._fail(job, exc)
            return
        self._commit_id = next(self._commits)
        rejected = job.items - stored
        message = f"{rejected} item(s) could not be stored: {errors[0]}" if errors else ""
        now = time.time()
        self._reply(
            job.req_id,
            True,
            (stored, rejected, message, min(times, default=now), max(times, default=now)),
            self._meta(),
        )

    def _store_halves(
        self,
        rows: Sequence[tuple[Any, ...]],
        table_of: Callable[[Sequence[tuple[Any, ...]]], pa.Table],
        insert: Callable[[Connection, Sequence[pa.Table], float, str], None],
        errors: list[str],
        times: list[float],
        consumer: str,
    ) -> int:
        n = len(rows)
        if n == 0:
            return 0
        try:
            table = table_of(rows)
        except DATA_ERRORS as exc:
            return self._halve(rows, table_of, insert, errors, times, exc, consumer)
        catalog = self._claim_log()
        marks: dict[str, int] = {}
        feedmarks.merge(marks, consumer, feedmarks.largest_offset(rows))
        try:
            self._con.execute("BEGIN TRANSACTION")
            received = time.time()
            insert(self._con, [table], received, catalog)
            feedmarks.write_marks(self._con, catalog, marks)  # the consumer's mark: with its rows
            self._con.execute("COMMIT")
        except DATA_ERRORS as exc:
            self._rollback(self._con)
            self._release_log()
            return self._halve(rows, table_of, insert, errors, times, exc, consumer)
        except duckdb.Error:
            self._rollback(self._con)
            self._release_log()
            raise
        self._release_log()
        times.append(received)
        return n

    def _halve(
        self,
        rows: Sequence[tuple[Any, ...]],
        table_of: Callable[[Sequence[tuple[Any, ...]]], pa.Table],
        insert: Callable[[Connection, Sequence[pa.Table], float, str], None],
        errors: list[str],
        times: list[float],
        exc: BaseException,
        consumer: str,
    ) -> int:
        if len(rows) == 1:
            errors.append(str(exc).splitlines()[0][:300])
            return 0
        mid = len(rows) // 2
        return self._store_halves(rows[:mid], table_of, insert, errors, times, consumer) + self._store_halves(
            rows[mid:], table_of, insert, errors, times, consumer
        )
