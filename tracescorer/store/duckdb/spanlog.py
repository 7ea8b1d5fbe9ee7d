"""The DuckDB store's span log part: raw telemetry in, traces back by id, and the assembly records.

The span log's tables live in two files of their own (:mod:`tracescorer.store.duckdb.layout`);
``assembled_traces`` and the assembled-through mark live in the main database. Feeds of the
segment log are consumers, each with its own feed state (:mod:`tracescorer.store.duckdb.feedmarks`);
``consumer=""`` is the single feed of a daemon without workers.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from tracescorer.model import LogRecord, Span
from tracescorer.records.scores import AssemblyRecord
from tracescorer.records.skipped import SkippedTrace
from tracescorer.store.api import AppendOutcome, AssembledBefore, QueueFull, StoreClosed, TraceData
from tracescorer.store.duckdb import feedmarks, layout, rows, wire
from tracescorer.store.duckdb.jobs import Jobs, Row, alone, coalescable, hinted
from tracescorer.store.duckdb.upsert import chunks, key_in, upsert
from tracescorer.store.tables import ASSEMBLED_COLUMNS, column_names

#: How far before the recorded assembly watermark recovery looks (commits in flight, clock steps).
RECOVERY_MARGIN = dt.timedelta(minutes=5)


WATERMARK = "assembled_through"
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

    async def load_traces(
        self, trace_ids: Sequence[str], *, received: tuple[float, float] | None = None
    ) -> dict[str, TraceData]:
        found = await self.read(load_traces, list(trace_ids), received)
        return {
            tid: TraceData(spans=tuple(rows.span_from_row(r) for r in s), logs=tuple(rows.log_from_row(r) for r in lg))
            for tid, (s, lg) in found.items()
        }

    async def pending_traces(
        self, *, limit: int, consumer: str = "", share: tuple[int, int] | None = None, until: float | None = None
    ) -> list[tuple[str, float, float, bool]]:
        since = recovery_since(await self.read(assembled_marks), [consumer])
        return await self.read(pending_traces, since, limit, share, until)

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

    async def has_assembled_mark(self, consumer: str = "") -> bool:
        return consumer in await self.read(assembled_marks)

    async def set_assembled_through(self, when: dt.datetime, consumer: str = "") -> None:
        await self.write(write_marker, mark_key(consumer), when.isoformat())

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


def _received(bounds: tuple[float, float] | None) -> tuple[str, list[Any]]:
    # received_at is the commit time and rows are appended in that order: with the exact range
    # DuckDB skips every row group and vector outside it (a read of a few traces otherwise
    # decompresses every span of the log: ~250 ms per 100k spans, against ~8 ms)
    if bounds is None:
        return "", []
    return " AND received_at BETWEEN to_timestamp(?) AND to_timestamp(?)", [bounds[0], bounds[1]]


def load_traces(
    con: Any, trace_ids: Sequence[str], received: tuple[float, float] | None
) -> dict[str, tuple[list[Row], list[Row]]]:
    """Span and log rows (``rows.SPAN_SELECT`` / ``LOG_SELECT`` order) of the given traces,
    received in the given range (epoch seconds) when one is given."""
    out: dict[str, tuple[list[Row], list[Row]]] = {t: ([], []) for t in trace_ids}
    if not trace_ids:
        return out
    extra, params = _received(received)
    ids = [list(trace_ids)]
    for row in con.execute(
        rows.SPAN_SELECT + " WHERE trace_id IN (SELECT unnest(?::VARCHAR[]))" + extra, ids + params
    ).fetchall():
        out[row[0]][0].append(row)
    for row in con.execute(
        rows.LOG_SELECT + " WHERE trace_id IN (SELECT unnest(?::VARCHAR[]))" + extra, ids + params
    ).fetchall():
        out[row[7]][1].append(row)
    return out


#: a worker's share of the trace ids, as :func:`tracescorer.feed.partition.of` computes it from the
#: raw id: its last four bytes (the hex id's last eight digits) modulo the worker count
SHARE_SQL = "CASE WHEN length(per.trace_id) >= 8 THEN ('0x' || right(per.trace_id, 8))::UBIGINT ELSE 0 END"

_PENDING_SQL = """
WITH latest AS (
  SELECT trace_id, min(received_at) AS first_received, max(received_at) AS last_received
  FROM spans WHERE received_at >= ? AND (?::DOUBLE IS NULL OR received_at < to_timestamp(?)) GROUP BY trace_id
  UNION ALL
  SELECT trace_id, min(received_at), max(received_at)
  FROM log_records WHERE trace_id IS NOT NULL AND received_at >= ?
    AND (?::DOUBLE IS NULL OR received_at < to_timestamp(?)) GROUP BY trace_id
), per AS (
  SELECT trace_id, min(first_received) AS first_received, max(last_received) AS last_received
  FROM latest GROUP BY trace_id
)
SELECT per.trace_id, epoch(per.first_received), epoch(per.last_received), a.trace_id IS NOT NULL
FROM per LEFT JOIN assembled_traces a USING (trace_id)
WHERE (a.trace_id IS NULL OR per.last_received > coalesce(a.last_received_at, a.assembled_at))
  AND (?::INTEGER IS NULL OR {share} % ?::UBIGINT = ?::UBIGINT)
ORDER BY per.last_received
LIMIT ?
"""


def pending_traces(
    con: Any,
    since: dt.datetime,
    limit: int,
    share: tuple[int, int] | None = None,
    until: float | None = None,
) -> list[tuple[str, float, float, bool]]:
    """Traces with items received since ``since`` (and before ``until``, epoch seconds: rounded
    as the stamp a commit reports is, so a commit's own rows are never before it) that were never
    assembled, or received items after their assembly, oldest first: (trace id, first and last
    such item received (epoch s), assembled before); with ``share`` (index, count), only that
    worker's traces."""
    index, count = share if share is not None else (None, 1)
    sql = _PENDING_SQL.replace("{share}", SHARE_SQL)
    params = [since, until, until, since, until, until, index, count, index, limit]
    return [(r[0], float(r[1]), float(r[2]), bool(r[3])) for r in con.execute(sql, params).fetchall()]


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


def recovery_since(marks: Mapping[str, str], consumers: Collection[str]) -> dt.datetime:
    """From when the recovery of any of ``consumers`` looks at the span log, given every
    consumer's assembled-through mark (:func:`assembled_marks`): its own mark less
    :data:`RECOVERY_MARGIN`; a consumer without one (new to the store) starts from the oldest mark
    of all; no mark at all: from the beginning."""
    oldest = min(marks.values(), default=None)
    since = [dt.datetime.fromisoformat(m) - RECOVERY_MARGIN for c in consumers if (m := marks.get(c) or oldest)]
    return min(since, default=dt.datetime.fromtimestamp(0, dt.UTC))


def mark_key(consumer: str) -> str:
    """The ``schema_info`` key of a consumer's assembled-through mark."""
    return WATERMARK + (f":{consumer}" if consumer else "")


def forget_marks(con: Any, consumers: Sequence[str]) -> None:
    """Delete the assembled-through marks of ``consumers``."""
    con.execute("DELETE FROM schema_info WHERE list_contains(?::VARCHAR[], key)", [[mark_key(c) for c in consumers]])


def assembled_marks(con: Any) -> dict[str, str]:
    """Each consumer's assembled-through mark (ISO time), ``""`` the daemon's own feed's."""
    rows = con.execute(
        "SELECT key, value FROM schema_info WHERE key = ? OR starts_with(key, ?)", [WATERMARK, WATERMARK + ":"]
    ).fetchall()
    return {str(k)[len(WATERMARK) + 1 :]: str(v) for k, v in rows}


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
