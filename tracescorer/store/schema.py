"""DuckDB table definitions (the names and columns are contracts: see ARCHITECTURE.md)."""

from __future__ import annotations

SPAN_COLUMNS: tuple[tuple[str, str], ...] = (
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

LOG_COLUMNS: tuple[tuple[str, str], ...] = (
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


def _create(table: str, columns: tuple[tuple[str, str], ...]) -> str:
    body = ",\n  ".join(f"{name} {kind}" for name, kind in columns)
    return f"CREATE TABLE IF NOT EXISTS {table} (\n  {body}\n)"


DDL: tuple[str, ...] = (
    _create("spans", SPAN_COLUMNS),
    _create("log_records", LOG_COLUMNS),
    "CREATE TABLE IF NOT EXISTS schema_info (key VARCHAR PRIMARY KEY, value VARCHAR)",
    "INSERT OR IGNORE INTO schema_info VALUES ('version', '1')",
)
