"""Appending span-log rows to DuckDB as Arrow tables (the store process's hot path).

:func:`tracescorer.store.duckdb.rows.span_rows` builds plain tuples in the daemon; here they become
Arrow columns that DuckDB scans without a Python object per value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from tracescorer.store.duckdb.upsert import unregister

_S, _U, _I = pa.string(), pa.uint64(), pa.int64()

# The columns built from Python for each table, in order; the TIMESTAMPTZ columns are computed
# in SQL from the microsecond values.
SPAN_INPUT = pa.schema(
    [
        ("trace_id", _S),
        ("span_id", _S),
        ("parent_span_id", _S),
        ("trace_state", _S),
        ("flags", _U),
        ("name", _S),
        ("kind", _S),
        ("start_us", _I),
        ("end_us", _I),
        ("start_ns", _U),
        ("end_ns", _U),
        ("status_code", _S),
        ("status_message", _S),
        ("service_name", _S),
        ("scope_name", _S),
        ("scope_version", _S),
        ("resource_attributes", _S),
        ("scope_attributes", _S),
        ("attributes", _S),
        ("events", _S),
        ("links", _S),
        ("dropped_attributes_count", _U),
        ("dropped_events_count", _U),
        ("dropped_links_count", _U),
        ("resource_schema_url", _S),
        ("scope_schema_url", _S),
        ("log_offset", _U),
    ]
)

LOG_INPUT = pa.schema(
    [
        ("time_ns", _U),
        ("observed_ns", _U),
        ("severity_number", pa.int32()),
        ("severity_text", _S),
        ("event_name", _S),
        ("body", _S),
        ("attributes", _S),
        ("trace_id", _S),
        ("span_id", _S),
        ("flags", _U),
        ("dropped_attributes_count", _U),
        ("service_name", _S),
        ("scope_name", _S),
        ("scope_version", _S),
        ("resource_attributes", _S),
        ("scope_attributes", _S),
        ("resource_schema_url", _S),
        ("scope_schema_url", _S),
        ("log_offset", _U),
    ]
)

SKIPPED_INPUT = pa.schema(
    [("trace_id", _S), ("service_name", _S), ("span_count", pa.int32()), ("log_count", pa.int32()), ("log_offset", _U)]
)

SPAN_INSERT = """
INSERT INTO {catalog}.spans SELECT
  trace_id, span_id, parent_span_id, trace_state, flags, name, kind,
  make_timestamp(start_us)::TIMESTAMPTZ, make_timestamp(end_us)::TIMESTAMPTZ,
  start_ns, end_ns, status_code, status_message, service_name, scope_name, scope_version,
  resource_attributes, scope_attributes, attributes, events, links,
  dropped_attributes_count, dropped_events_count, dropped_links_count,
  resource_schema_url, scope_schema_url, to_timestamp($received), log_offset
FROM span_batch
"""

LOG_INSERT = """
INSERT INTO {catalog}.log_records SELECT
  make_timestamp(((CASE WHEN time_ns > 0 THEN time_ns ELSE observed_ns END) // 1000)::BIGINT)::TIMESTAMPTZ,
  time_ns, observed_ns, severity_number, severity_text, event_name, body,
  attributes, trace_id, span_id, flags, dropped_attributes_count, service_name,
  scope_name, scope_version, resource_attributes, scope_attributes,
  resource_schema_url, scope_schema_url, to_timestamp($received), log_offset
FROM log_batch
"""


SKIPPED_INSERT = """
INSERT INTO {catalog}.skipped_traces
SELECT trace_id, service_name, span_count, log_count, to_timestamp($received), log_offset FROM skipped_batch
"""


def _table(schema: pa.Schema, rows: Sequence[tuple[Any, ...]]) -> pa.Table:
    return pa.Table.from_arrays(
        [pa.array(col, type=f.type) for col, f in zip(zip(*rows, strict=False), schema, strict=False)], schema=schema
    )


def span_table(rows: Sequence[tuple[Any, ...]]) -> pa.Table:
    """Arrow table of :func:`~tracescorer.store.duckdb.rows.span_rows` tuples (raises for values out of
    the column types)."""
    return _table(SPAN_INPUT, rows)


def log_table(rows: Sequence[tuple[Any, ...]]) -> pa.Table:
    return _table(LOG_INPUT, rows)


def skipped_table(rows: Sequence[tuple[Any, ...]]) -> pa.Table:
    return _table(SKIPPED_INPUT, rows)


def _insert(con: Any, name: str, sql: str, tables: Sequence[pa.Table], received: float) -> None:
    table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    con.register(name, table)
    try:
        con.execute(sql, {"received": received})
    finally:
        unregister(con, name)  # a failed insert's own error propagates, not the aborted transaction's


def insert_spans(con: Any, tables: Sequence[pa.Table], received: float, catalog: str) -> None:
    """Append span rows to the span log ``catalog`` (DuckDB scans the Arrow tables directly);
    ``received`` (epoch seconds) is their ``received_at``."""
    _insert(con, "span_batch", SPAN_INSERT.format(catalog=catalog), tables, received)


def insert_logs(con: Any, tables: Sequence[pa.Table], received: float, catalog: str) -> None:
    _insert(con, "log_batch", LOG_INSERT.format(catalog=catalog), tables, received)


def insert_skipped(con: Any, tables: Sequence[pa.Table], received: float, catalog: str) -> None:
    _insert(con, "skipped_batch", SKIPPED_INSERT.format(catalog=catalog), tables, received)
