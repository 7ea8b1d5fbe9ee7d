"""Table declarations (names and columns are contracts: see ARCHITECTURE.md).

The span log and runs tables are declared here column by column; the score, decision and assembly
tables derive their columns from the record dataclasses in :mod:`tracescorer.store.records`, so
each row shape is declared once. :mod:`tracescorer.store.duckdb.migrations` creates and upgrades them.
"""

from __future__ import annotations

import dataclasses

from tracescorer.records.scores import AssemblyRecord, DecisionRecord, ScoreRecord

Columns = tuple[tuple[str, str], ...]

SPAN_COLUMNS: Columns = (
    ("trace_id", "VARCHAR NOT NULL"),
    ("span_id", "VARCHAR NOT NULL"),
    ("parent_span_id", "VARCHAR"),
    ("trace_state", "VARCHAR"),
    ("flags", "UBIGINT"),
    ("name", "VARCHAR"),
    ("kind", "VARCHAR"),
    ("start_time", "TIMESTAMPTZ"),
    ("end_time", "TIMESTAMPTZ"),
    ("start_time_unix_nano", "UBIGINT"),
    ("end_time_unix_nano", "UBIGINT"),
    ("status_code", "VARCHAR"),
    ("status_message", "VARCHAR"),
    ("service_name", "VARCHAR"),
    ("scope_name", "VARCHAR"),
    ("scope_version", "VARCHAR"),
    ("resource_attributes", "JSON"),
    ("scope_attributes", "JSON"),
    ("attributes", "JSON"),
    ("events", "JSON"),
    ("links", "JSON"),
    ("dropped_attributes_count", "UBIGINT"),
    ("dropped_events_count", "UBIGINT"),
    ("dropped_links_count", "UBIGINT"),
    ("resource_schema_url", "VARCHAR"),
    ("scope_schema_url", "VARCHAR"),
    ("received_at", "TIMESTAMPTZ"),
)

LOG_COLUMNS: Columns = (
    ("time", "TIMESTAMPTZ"),
    ("time_unix_nano", "UBIGINT"),
    ("observed_time_unix_nano", "UBIGINT"),
    ("severity_number", "INTEGER"),
    ("severity_text", "VARCHAR"),
    ("event_name", "VARCHAR"),
    ("body", "JSON"),
    ("attributes", "JSON"),
    ("trace_id", "VARCHAR"),
    ("span_id", "VARCHAR"),
    ("flags", "UBIGINT"),
    ("dropped_attributes_count", "UBIGINT"),
    ("service_name", "VARCHAR"),
    ("scope_name", "VARCHAR"),
    ("scope_version", "VARCHAR"),
    ("resource_attributes", "JSON"),
    ("scope_attributes", "JSON"),
    ("resource_schema_url", "VARCHAR"),
    ("scope_schema_url", "VARCHAR"),
    ("received_at", "TIMESTAMPTZ"),
)

RUN_COLUMNS: Columns = (
    ("run_id", "VARCHAR PRIMARY KEY"),
    ("trace_id", "VARCHAR NOT NULL"),
    ("span_id", "VARCHAR"),
    ("parent_span_id", "VARCHAR"),
    ("conversation_id", "VARCHAR"),
    ("resource_id", "VARCHAR"),
    ("agent_name", "VARCHAR"),
    ("agent_id", "VARCHAR"),
    ("service_name", "VARCHAR"),
    ("convention", "VARCHAR"),
    ("model", "VARCHAR"),
    ("started_at", "TIMESTAMPTZ"),
    ("ended_at", "TIMESTAMPTZ"),
    ("started_at_unix_nano", "UBIGINT"),
    ("ended_at_unix_nano", "UBIGINT"),
    ("status", "VARCHAR"),
    ("error", "VARCHAR"),
    ("input_messages", "JSON"),
    ("remembered_messages", "JSON"),
    ("system_messages", "JSON"),
    ("tagged_system_messages", "JSON"),
    ("output", "JSON"),
    ("tool_calls", "JSON"),
    ("usage", "JSON"),
    ("attributes", "JSON"),
    ("incomplete", "BOOLEAN"),
    ("created_at", "TIMESTAMPTZ"),
    ("updated_at", "TIMESTAMPTZ"),
)

_BASE_TYPES = {"str": "VARCHAR", "float": "DOUBLE", "int": "BIGINT", "bool": "BOOLEAN"}


def _sql_type(f: dataclasses.Field[object]) -> str:
    if "sql" in f.metadata:
        return str(f.metadata["sql"])
    base = str(f.type).split("|")[0].strip()
    if base not in _BASE_TYPES:
        raise TypeError(f"no SQL type for field {f.name}: {f.type}")
    return _BASE_TYPES[base]


def record_columns(
    record: type, *, key: str, not_null: tuple[str, ...] = (), before: Columns = (), after: Columns = ()
) -> Columns:
    """Columns of a record's table: ``key`` first (primary key), ``before`` right after it, then the
    other fields in declaration order, then ``after`` (columns the store sets itself)."""
    cols: list[tuple[str, str]] = []
    for f in dataclasses.fields(record):
        kind = _sql_type(f)
        if f.name == key:
            cols.insert(0, (f.name, f"{kind} PRIMARY KEY"))
            continue
        cols.append((f.name, f"{kind} NOT NULL" if f.name in not_null else kind))
    return (cols[0], *before, *cols[1:], *after)


_STAMP = "TIMESTAMPTZ"
SCORE_COLUMNS = record_columns(
    ScoreRecord,
    key="id",
    not_null=("scorer_id",),
    after=(("created_at", _STAMP), ("updated_at", _STAMP), ("exported_at", _STAMP)),
)
DECISION_COLUMNS = record_columns(DecisionRecord, key="id", not_null=("scorer_id",), after=(("decided_at", _STAMP),))
ASSEMBLED_COLUMNS = record_columns(AssemblyRecord, key="trace_id", before=(("assembled_at", _STAMP),))

#: The span log's tables, in their own file (:mod:`tracescorer.store.duckdb.layout`); the main database
#: has views of the same names.
SPAN_LOG_TABLES: dict[str, Columns] = {
    "spans": SPAN_COLUMNS,
    "log_records": LOG_COLUMNS,
}

#: The main database's tables.
TABLES: dict[str, Columns] = {
    "runs": RUN_COLUMNS,
    "assembled_traces": ASSEMBLED_COLUMNS,
    "scores": SCORE_COLUMNS,
    "scoring_decisions": DECISION_COLUMNS,
}


INDEXES: tuple[str, ...] = ("CREATE INDEX IF NOT EXISTS runs_trace ON runs (trace_id)",)


def create_table(table: str, columns: Columns, catalog: str | None = None) -> str:
    body = ",\n  ".join(f"{name} {kind}" for name, kind in columns)
    return f"CREATE TABLE IF NOT EXISTS {catalog + '.' if catalog else ''}{table} (\n  {body}\n)"


def column_names(columns: Columns) -> list[str]:
    return [name for name, _ in columns]
