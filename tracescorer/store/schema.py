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


RUN_COLUMNS: tuple[tuple[str, str], ...] = (
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

# One row per assembled trace: when, how, and why it gave no run (powers `runs --unmatched` and
# restart recovery: traces with spans newer than their row are assembled again).
ASSEMBLED_COLUMNS: tuple[tuple[str, str], ...] = (
    ("trace_id", "VARCHAR PRIMARY KEY"),
    ("assembled_at", "TIMESTAMPTZ"),
    ("reason", "VARCHAR"),
    ("incomplete", "BOOLEAN"),
    ("span_count", "INTEGER"),
    ("log_count", "INTEGER"),
    ("run_count", "INTEGER"),
    ("unmatched_reason", "VARCHAR"),
    ("service_name", "VARCHAR"),
    ("root_name", "VARCHAR"),
)


# One row per (scorer, target): re-scoring upserts the same deterministic id. Columns follow
# Mastra's score row (ARCHITECTURE.md); `label`, `threshold` and `error_type` are additions.
SCORE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "VARCHAR PRIMARY KEY"),
    ("scorer_id", "VARCHAR NOT NULL"),
    ("scorer_name", "VARCHAR"),
    ("run_id", "VARCHAR"),
    ("trace_id", "VARCHAR"),
    ("span_id", "VARCHAR"),
    ("conversation_id", "VARCHAR"),
    ("entity_type", "VARCHAR"),  # agent | conversation
    ("entity_id", "VARCHAR"),  # agent name
    ("source", "VARCHAR"),  # live | backfill
    ("score", "DOUBLE"),
    ("reason", "VARCHAR"),
    ("status", "VARCHAR"),  # ok | error | not_scorable
    ("error", "VARCHAR"),
    ("error_type", "VARCHAR"),
    ("label", "VARCHAR"),  # pass | fail when the binding has a threshold
    ("threshold", "DOUBLE"),
    ("preprocess_step_result", "JSON"),
    ("analyze_step_result", "JSON"),
    ("preprocess_prompt", "VARCHAR"),
    ("analyze_prompt", "VARCHAR"),
    ("generate_score_prompt", "VARCHAR"),
    ("generate_reason_prompt", "VARCHAR"),
    ("judge_model", "VARCHAR"),
    ("judge_input_tokens", "BIGINT"),
    ("judge_output_tokens", "BIGINT"),
    ("judge_cost_usd", "DOUBLE"),
    ("judge_attempts", "INTEGER"),
    ("duration_ms", "DOUBLE"),
    ("sample_rate", "DOUBLE"),
    ("metadata", "JSON"),
    ("created_at", "TIMESTAMPTZ"),
    ("updated_at", "TIMESTAMPTZ"),
    ("exported_at", "TIMESTAMPTZ"),
)

# Why each bound scorer did or did not score each target (latest decision per pair).
DECISION_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "VARCHAR PRIMARY KEY"),
    ("scorer_id", "VARCHAR NOT NULL"),
    ("target_type", "VARCHAR"),  # run | conversation
    ("target_id", "VARCHAR"),  # run id or conversation id
    ("trace_id", "VARCHAR"),
    ("conversation_id", "VARCHAR"),
    ("decision", "VARCHAR"),  # scored | sampled_out | filtered_out | not_scorable | rate_limited | budget_exhausted | failed
    ("detail", "VARCHAR"),
    ("sample_rate", "DOUBLE"),
    ("source", "VARCHAR"),
    ("score_id", "VARCHAR"),
    ("decided_at", "TIMESTAMPTZ"),
)


def _create(table: str, columns: tuple[tuple[str, str], ...]) -> str:
    body = ",\n  ".join(f"{name} {kind}" for name, kind in columns)
    return f"CREATE TABLE IF NOT EXISTS {table} (\n  {body}\n)"


DDL: tuple[str, ...] = (
    _create("spans", SPAN_COLUMNS),
    _create("log_records", LOG_COLUMNS),
    _create("runs", RUN_COLUMNS),
    _create("assembled_traces", ASSEMBLED_COLUMNS),
    "CREATE INDEX IF NOT EXISTS runs_trace ON runs (trace_id)",
    _create("scores", SCORE_COLUMNS),
    _create("scoring_decisions", DECISION_COLUMNS),
    "CREATE TABLE IF NOT EXISTS schema_info (key VARCHAR PRIMARY KEY, value VARCHAR)",
    "INSERT OR IGNORE INTO schema_info VALUES ('version', '1')",
)
