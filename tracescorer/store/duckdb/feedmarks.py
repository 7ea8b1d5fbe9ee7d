"""Feed state per consumer of the segment log: where each feed resumes and the rows it stored.

Several feeds (the daemon's worker processes, one per partition of trace ids) read the same
segment log; each is a *consumer*. The unnamed consumer ``""`` is the single feed of a daemon
without workers: its resume offset is the ``feed_offset`` marker (as before consumers existed).
A named consumer's resume offset is the marker ``feed_offset:<consumer>`` in ``schema_info``.

A consumer's rows-through mark must be exact even after a crash between the commit of its rows and
anything after it, so it is written in the same transaction as the rows: a table
``feed_marks (consumer, rows_through)`` in each span log file. A transaction writes one file only
(DuckDB's rule, :mod:`tracescorer.store.duckdb.layout`), and the rows of one transaction (spans,
log records, skipped traces) all go to the one span log the telemetry writer holds, so the mark
goes there too; a consumer's mark is the larger of the two files' marks. Retention deletes rows,
never marks. A file written before marks existed had one feed: at open, its largest stored
``log_offset`` becomes the unnamed consumer's mark (:func:`create_tables`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tracescorer.store.duckdb.layout import SPAN_LOGS, quote

TABLE = "feed_marks"
FEED_OFFSET = "feed_offset"  # the unnamed consumer's marker (as before consumers existed)
_PREFIX = FEED_OFFSET + ":"


def offset_key(consumer: str) -> str:
    """The ``schema_info`` key of a consumer's resume offset."""
    return FEED_OFFSET if not consumer else _PREFIX + consumer


def create_tables(con: Any) -> None:
    """Create ``feed_marks`` in each span log (one statement, one file each: autocommit); give a
    file from before marks existed (rows, no mark) the unnamed consumer's mark."""
    for catalog in SPAN_LOGS:
        con.execute(
            f"CREATE TABLE IF NOT EXISTS {quote(catalog)}.{TABLE} "
            "(consumer VARCHAR PRIMARY KEY, rows_through UBIGINT NOT NULL)"
        )
    if con.execute(f"SELECT count(*) FROM ({_marks_union()})").fetchall()[0][0]:
        return
    parts = " UNION ALL ".join(
        f"SELECT max(log_offset) AS o FROM {quote(catalog)}.{table}"
        for catalog in SPAN_LOGS
        for table in ("spans", "log_records", "skipped_traces")
    )
    stored = con.execute(f"SELECT max(o) FROM ({parts})").fetchall()[0][0]
    if stored is not None:
        con.execute(f"INSERT INTO {quote(SPAN_LOGS[0])}.{TABLE} VALUES ('', ?)", [int(stored)])


def largest_offset(rows: Iterable[Sequence[Any] | None]) -> int | None:
    """The largest log offset of span/log/skipped row tuples (each has it last; None when none has one)."""
    found: int | None = None
    for row in rows:
        if row is not None and row[-1] is not None and (found is None or row[-1] > found):
            found = int(row[-1])
    return found


def merge(marks: dict[str, int], consumer: str, offset: int | None) -> None:
    """Fold one job's largest offset into the marks of a transaction."""
    if offset is not None and offset > marks.get(consumer, -1):
        marks[consumer] = offset


def write_marks(con: Any, catalog: str, marks: dict[str, int]) -> None:
    """Raise the consumers' marks in span log ``catalog``, inside the transaction of their rows."""
    for consumer, offset in marks.items():
        con.execute(
            f"INSERT INTO {quote(catalog)}.{TABLE} VALUES (?, ?) ON CONFLICT (consumer) "
            "DO UPDATE SET rows_through = greatest(rows_through, excluded.rows_through)",
            [consumer, offset],
        )


# --- reads, run in the store process -------------------------------------------------------------


def _marks_union() -> str:
    return " UNION ALL ".join(f"SELECT consumer, rows_through FROM {quote(c)}.{TABLE}" for c in SPAN_LOGS)


def rows_through(con: Any, consumer: str) -> int | None:
    """The largest log offset of the rows ``consumer`` stored."""
    row = con.execute(f"SELECT max(rows_through) FROM ({_marks_union()}) WHERE consumer = ?", [consumer]).fetchall()
    return None if not row or row[0][0] is None else int(row[0][0])


def consumers(con: Any) -> dict[str, tuple[int, int | None]]:
    """Every consumer with saved state (the unnamed one too): consumer -> (resume offset,
    rows-through mark)."""
    offsets = {
        (str(key)[len(_PREFIX) :] if key != FEED_OFFSET else ""): int(value)
        for key, value in con.execute(
            "SELECT key, value FROM schema_info WHERE starts_with(key, ?) OR key = ?", [_PREFIX, FEED_OFFSET]
        ).fetchall()
    }
    marks = {
        str(consumer): int(mark)
        for consumer, mark in con.execute(
            f"SELECT consumer, max(rows_through) FROM ({_marks_union()}) GROUP BY consumer"
        ).fetchall()
    }
    return {name: (offsets.get(name, 0), marks.get(name)) for name in sorted({*offsets, *marks})}
