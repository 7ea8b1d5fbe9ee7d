"""The DuckDB store's span log part: span rows in (a derived copy, ``store.spans``), the feeds'
state, and the assembly records.

The span rows live in two files of their own (:mod:`tracescorer.store.duckdb.layout`);
``assembled_traces`` lives in the main database. Feeds of the segment log are consumers, each with
its own feed state (:mod:`tracescorer.store.duckdb.feedmarks`); ``consumer=""`` is the single
assembly feed of a daemon without workers.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Collection, Sequence
from typing import Any

from tracescorer.model import LogRecord, Span
from tracescorer.records.scores import AssemblyRecord
from tracescorer.records.skipped import SkippedTrace
from tracescorer.store.api import AppendOutcome, AssembledBefore, QueueFull, StoreClosed
from tracescorer.store.duckdb import feedmarks, layout, rows, wire
from tracescorer.store.duckdb.jobs import Jobs, Row, alone, coalescable, hinted
from tracescorer.store.duckdb.upsert import chunks, key_in, upsert
from tracescorer.store.tables import ASSEMBLED_COLUMNS, column_names

INSTANCE_KEY = "instance_id"
FEED_OFFSET = feedmarks.FEED_OFFSET  # where the segment log's (unnamed) feed resumes


class SpanLogPart(Jobs):
    """:class:`~tracescorer.store.api.Intake` and :class:`~tracescorer.store.api.SpanLog` on the store process."""

    max_queue_items: int
    _pending_items: int
    _closing: bool
    _channel: Any

    @property
    def pending_items(self) -> int:
        return self._pending_items

    async def append(
        self,
        spans: Sequence[Span],
        logs: Sequence[LogRecord] = (),
        *,
        span_offsets: Sequence[int] | None = None,
        log_offsets: Sequence[int] | None = None,
        skipped: Sequence[SkippedTrace] = (),
        consumer: str = "",
    ) -> AppendOutcome:
        span_rows, span_bad = rows.span_rows(spans, span_offsets) if spans else ([], [])
        log_rows, log_bad = rows.log_rows(logs, log_offsets) if logs else ([], [])
        skipped_rows = [(t.trace_id, t.service_name, t.span_count, t.log_count, t.log_offset) for t in skipped]
        bad = span_bad + log_bad
        items = (len(spans) - len(span_bad)) + (len(logs) - len(log_bad))
        message = "; ".join(m for _, m in bad[:5])
        if items == 0 and not skipped_rows:
            return AppendOutcome(stored=0, rejected=len(bad), message=message)
        if self._closing or self._channel is None:
            raise StoreClosed("store is shutting down" if self._closing else "store is not available")
        # an oversized request is still admitted into an empty queue, so it can make progress
        if self._pending_items and self._pending_items + items > self.max_queue_items:
            raise QueueFull(f"write queue full ({self._pending_items} items waiting)")
        stored, rejected, detail, first, last = await self._request(
            wire.TELEMETRY, (span_rows or None, log_rows or None, skipped_rows or None, consumer), items
        )
        if detail:
            message = "; ".join(filter(None, (message, detail)))
        return AppendOutcome(
            stored=stored, rejected=rejected + len(bad), message=message, received_from=first, received_to=last
        )

    async def assembled_before(self, trace_ids: Sequence[str]) -> dict[str, AssembledBefore]:
        return dict(await self.read(assembled_before, list(trace_ids))) if trace_ids else {}

    async def rows_through(self, consumer: str = "") -> int | None:
        return await self.read(feedmarks.rows_through, consumer)

    async def feed_offset(self, consumer: str = "") -> int:
        stored = await self.read(read_marker, feedmarks.offset_key(consumer))
        return int(stored) if stored else 0

    async def set_feed_offset(self, offset: int, consumer: str = "") -> None:
        await self.write(write_marker, feedmarks.offset_key(consumer), str(offset))

    async def feed_consumers(self) -> dict[str, tuple[int, int | None]]:
        return await self.read(feedmarks.consumers)

    async def instance_id(self) -> str:
        """This span log's instance id (made at first use, kept in the file): in postgres mode it
        names the daemon whose span log this is, across its restarts."""
        instance = await self.read(read_marker, INSTANCE_KEY)
        if not instance:
            instance = secrets.token_hex(8)
            await self.write(write_marker, INSTANCE_KEY, instance)
        return instance

    async def record_assembly(self, records: Sequence[AssemblyRecord], *, new_traces: Collection[str] = ()) -> None:
        new = set(new_traces)
        await self.write(record_assembly, [_assembly_values(r) for r in records], [r.trace_id in new for r in records])

    async def prune_span_log(self, older_than: dt.datetime) -> dict[str, int]:
        deleted: dict[str, int] = {}
        for catalog in layout.SPAN_LOGS:  # the spans first: a trace is never taken for unassembled
            for table, n in (await self.write(prune_spans, catalog, older_than)).items():
                deleted[table] = deleted.get(table, 0) + n
        return {**deleted, **await self.write(prune_assembled, older_than)}


def _assembly_values(record: AssemblyRecord) -> tuple[Any, ...]:
    return (
        record.trace_id,
        record.reason,
        record.incomplete,
        record.span_count,
        record.log_count,
        record.run_count,
        record.unmatched_reason,
        record.service_name,
        record.root_name,
        record.last_received_at,
        list(record.log_offsets) if record.log_offsets is not None else None,
    )


# --- run in the store process ------------------------------------------------------------------------


def assembled_before(con: Any, trace_ids: Sequence[str]) -> list[tuple[str, AssembledBefore]]:
    """The traces assembled before, each with its record: the log records its assembly read (empty
    when not recorded: the span log had its items) and the items it held."""
    found: list[tuple[str, AssembledBefore]] = []
    for part in chunks(list(trace_ids)):  # through the key's index, not a scan of every record
        found += [
            (r[0], AssembledBefore(tuple(r[1] or ()), int(r[2]), int(r[3])))
            for r in con.execute(
                "SELECT trace_id, log_offsets, span_count, log_count FROM assembled_traces "
                f"WHERE {key_in('trace_id', len(part))}",
                part,
            ).fetchall()
        ]
    return found


def read_marker(con: Any, key: str) -> str | None:
    rows = con.execute("SELECT value FROM schema_info WHERE key = ?", [key]).fetchall()
    return str(rows[0][0]) if rows else None


def write_marker(con: Any, key: str, value: str) -> None:
    con.execute("INSERT OR REPLACE INTO schema_info VALUES (?, ?)", [key, value])


_ASSEMBLED = [c for c in column_names(ASSEMBLED_COLUMNS) if c != "assembled_at"]


@coalescable
@hinted()
def record_assembly(con: Any, records: Sequence[Row], new: Sequence[bool]) -> int:
    """Upsert ``assembled_traces`` rows (values in record field order)."""
    return upsert(
        con,
        "assembled_traces",
        _ASSEMBLED,
        "trace_id",
        records,
        expressions={"last_received_at": "to_timestamp({})"},
        stamps={"assembled_at": "now()"},
        new=new,
    )


@alone
def prune_spans(con: Any, catalog: str, older_than: dt.datetime) -> dict[str, int]:
    """Delete the rows of one span log (a transaction writes one file) received before ``older_than``."""
    return _delete_before(
        con,
        (
            (f"{catalog}.spans", "spans", "received_at"),
            (f"{catalog}.log_records", "log_records", "received_at"),
            (f"{catalog}.skipped_traces", "skipped_traces", "received_at"),
        ),
        older_than,
    )


def prune_assembled(con: Any, older_than: dt.datetime) -> dict[str, int]:
    """Delete assembly records older than ``older_than`` (after :func:`prune_spans`: a trace
    whose spans are still there is never taken for unassembled)."""
    return _delete_before(con, (("assembled_traces", "assembled_traces", "assembled_at"),), older_than)


def _delete_before(con: Any, tables: Sequence[tuple[str, str, str]], older_than: dt.datetime) -> dict[str, int]:
    deleted = {}
    for table, name, column in tables:
        rows = con.execute(f"DELETE FROM {table} WHERE {column} < ?", [older_than]).fetchall()
        deleted[name] = int(rows[0][0]) if rows else 0
    return deleted
