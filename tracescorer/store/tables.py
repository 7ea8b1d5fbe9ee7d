"""Every table's columns, declared once for both engines (names and columns are contracts: see
docs/architecture.md).

The span log tables are declared here column by column; ``runs`` derives from
:class:`~tracescorer.model.AgentRun` (:mod:`tracescorer.store.runs`), the score, decision and
assembly tables from the records of :mod:`tracescorer.records.scores`. Types are written in
DuckDB's terms; :func:`create_table` renders a declaration for either engine (the dialect hook:
:func:`column_type`). Each engine's migrations create and upgrade the tables.
"""

from __future__ import annotations

import dataclasses

from tracescorer.records.labels import EvaluationRecord, LabelRecord
from tracescorer.records.scores import AssemblyRecord, DecisionRecord, ScoreRecord, VerdictRecord
from tracescorer.store.runs import RUN_COLUMNS as RUN_COLUMNS  # derived from AgentRun

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
    ("log_offset", "UBIGINT"),  # where the request that carried it starts in the segment log
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
    ("log_offset", "UBIGINT"),  # where the request that carried it starts in the segment log
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

#: Human labels (one per target, scorer and person) and other tools' evaluations received over OTLP
#: (:mod:`tracescorer.records.labels`).
LABEL_COLUMNS = record_columns(
    LabelRecord,
    key="id",
    not_null=("target_type", "target_id", "scorer_id", "author", "source", "labelled_at"),
    after=(("created_at", _STAMP), ("updated_at", _STAMP)),
)
EVALUATION_COLUMNS = record_columns(
    EvaluationRecord, key="id", not_null=("name", "source", "kind", "target_type"), after=(("received_at", _STAMP),)
)
#: The calibration tables' indexes in PostgreSQL: labels by scorer, evaluations by the ids they name.
#: DuckDB gets none (its ART indexes live in memory, within the key budget of
#: :mod:`tracescorer.store.duckdb.keys`; its scans skip row groups by their min/max).
CALIBRATION_INDEXES: tuple[str, ...] = (
    "CREATE INDEX IF NOT EXISTS labels_scorer ON labels (scorer_id, target_type, target_id)",
    "CREATE INDEX IF NOT EXISTS evaluations_trace ON evaluations (trace_id)",
    "CREATE INDEX IF NOT EXISTS evaluations_name ON evaluations (name, received_at)",
)


def calibration_tables(dialect: str = "duckdb") -> tuple[str, ...]:
    """``labels`` and ``evaluations`` (with their indexes in PostgreSQL), in ``dialect``."""
    return (
        create_table("labels", LABEL_COLUMNS, dialect=dialect),
        create_table("evaluations", EVALUATION_COLUMNS, dialect=dialect),
        *(CALIBRATION_INDEXES if dialect == "postgres" else ()),
    )


#: Per-sink delivery state of exported scores (semantics: :mod:`tracescorer.store.duckdb.deliveries`).
DELIVERY_COLUMNS: Columns = (
    ("score_id", "VARCHAR NOT NULL"),
    ("sink", "VARCHAR NOT NULL"),  # the sink's stable id: otlp, otlp_logs, phoenix, mlflow, otlp#2, ...
    ("score_version", "BIGINT NOT NULL"),  # epoch_us(scores.updated_at) of the version this row is about
    ("status", "VARCHAR NOT NULL"),  # pending | delivered | failed
    ("attempts", "INTEGER NOT NULL"),  # attempts for score_version so far
    ("next_attempt_at", "TIMESTAMPTZ"),  # pending: not retried before this
    ("last_error", "VARCHAR"),
    ("last_attempt_at", "TIMESTAMPTZ"),
    ("delivered_at", "TIMESTAMPTZ"),
    ("delivered_version", "BIGINT"),  # newest version ever delivered (the backend has a copy to update)
    ("claimed_by", "VARCHAR"),  # the daemon instance exporting it now ...
    ("claimed_until", "TIMESTAMPTZ"),  # ... until this lease runs out
)
DELIVERY_KEY = ("score_id", "sink")

#: The built-in monitors' state (one row each) and events (what each column means:
#: :class:`tracescorer.records.monitors.MonitorState`; ``pending`` holds its ``unsent``). The last four
#: columns came with DuckDB schema version 7 / PostgreSQL version 2, added at the end by the upgrade.
MONITOR_STATE_COLUMNS: Columns = (
    ("monitor_id", "VARCHAR PRIMARY KEY"),
    ("state", "VARCHAR NOT NULL"),  # ok | pending | firing | resolved
    ("since", "TIMESTAMPTZ"),
    ("value", "DOUBLE"),
    ("samples", "BIGINT"),
    ("evaluated_at", "TIMESTAMPTZ"),
    ("notified_at", "TIMESTAMPTZ"),  # the last firing message (first or reminder)
    ("firing_notified", "BOOLEAN"),  # the targets were last told firing
    ("pending", "VARCHAR"),  # a message decided but not yet attempted to the end (firing | resolved)
    ("updated_at", "TIMESTAMPTZ"),
    ("clear_since", "TIMESTAMPTZ"),  # firing: since when its readings are clear (keep_firing_for)
    ("resolved_at", "TIMESTAMPTZ"),  # when the last firing resolved
    ("notified_state", "VARCHAR"),  # what the targets were last told: firing | resolved
    ("reminders", "BIGINT"),  # reminders sent for the current firing (repeat_interval)
)
#: The columns schema version 7 (DuckDB) / 2 (PostgreSQL) added to ``monitor_state``.
MONITOR_STATE_V7: tuple[str, ...] = ("clear_since", "resolved_at", "notified_state", "reminders")
MONITOR_EVENT_COLUMNS: Columns = (
    ("monitor_id", "VARCHAR NOT NULL"),
    ("event_at", "TIMESTAMPTZ NOT NULL"),
    ("event", "VARCHAR NOT NULL"),
    ("state", "VARCHAR"),
    ("value", "DOUBLE"),
    ("samples", "BIGINT"),
    ("target", "VARCHAR"),
    ("detail", "VARCHAR"),
)

#: Coordination of the clients of one result store (several daemons on PostgreSQL, worker processes on
#: one DuckDB store process): when each conversation last got a run (the store's clock), which of its
#: activity was last scored, and the claim (lease) of whoever scores it now
#: (:mod:`tracescorer.store.duckdb.coordination`).
CONVERSATION_ACTIVITY_COLUMNS: Columns = (
    ("conversation_id", "VARCHAR PRIMARY KEY"),
    ("last_activity", "TIMESTAMPTZ NOT NULL"),  # when a run of it was last stored
    ("activity_seq", "BIGINT NOT NULL"),  # counts those writes: the version a scoring covers
    ("scored_seq", "BIGINT"),  # activity_seq covered by the last finished scoring
    ("scored_at", "TIMESTAMPTZ"),
    ("claimed_by", "VARCHAR"),  # the owner scoring it now ...
    ("claimed_until", "TIMESTAMPTZ"),  # ... until this lease runs out (renewed while it works)
    ("takeovers", "INTEGER NOT NULL DEFAULT 0"),  # claims taken from an owner whose lease had run out
)
#: The shared judge requests-per-minute token buckets (one per bucket name).
JUDGE_TOKEN_COLUMNS: Columns = (
    ("bucket", "VARCHAR PRIMARY KEY"),
    ("tokens", "DOUBLE NOT NULL"),
    ("updated_at", "TIMESTAMPTZ NOT NULL"),
)

#: Judge verdicts kept for reuse (:class:`~tracescorer.records.scores.VerdictRecord`): appended,
#: looked up by ``input_hash`` and ``scorer_version`` among the recent ones, deleted past the reuse
#: age. No key in DuckDB (its key indexes live in memory); an index in PostgreSQL.
VERDICT_COLUMNS = record_columns(
    VerdictRecord,
    key="",
    not_null=("input_hash", "scorer_version", "scorer_id", "model", "raw_output"),
    after=(("judged_at", "TIMESTAMPTZ NOT NULL"),),
)


_VERDICT_INDEXES = (
    "CREATE INDEX IF NOT EXISTS judge_verdicts_input ON judge_verdicts (input_hash, scorer_version, judged_at)",
    "CREATE INDEX IF NOT EXISTS judge_verdicts_at ON judge_verdicts (judged_at)",
)


def verdict_table(dialect: str = "duckdb") -> tuple[str, ...]:
    """``judge_verdicts`` in ``dialect`` (with its lookup index in PostgreSQL)."""
    return (
        create_table("judge_verdicts", VERDICT_COLUMNS, dialect=dialect),
        *(_VERDICT_INDEXES if dialect == "postgres" else ()),
    )


#: Provider batches of judge requests (:class:`~tracescorer.records.judge_batches.JudgeBatchRecord`):
#: a row per batch, written before it is submitted and updated as it goes; few rows (open ones are
#: read at start), so a key in both engines.
JUDGE_BATCH_COLUMNS: Columns = (
    ("id", "VARCHAR PRIMARY KEY"),
    ("model", "VARCHAR NOT NULL"),
    ("status", "VARCHAR NOT NULL"),
    ("request_keys", "JSON NOT NULL"),
    ("created_at", "DOUBLE NOT NULL"),
    ("provider_batch_id", "VARCHAR"),
)


def judge_batch_table(dialect: str = "duckdb") -> str:
    return create_table("judge_batches", JUDGE_BATCH_COLUMNS, dialect=dialect)


#: Traces triage skipped, a row per request (records.skipped.SkippedTrace; no key: appended only).
SKIPPED_COLUMNS: Columns = (
    ("trace_id", "VARCHAR NOT NULL"),
    ("service_name", "VARCHAR"),
    ("span_count", "INTEGER NOT NULL"),
    ("log_count", "INTEGER NOT NULL"),
    ("received_at", "TIMESTAMPTZ NOT NULL"),
    ("log_offset", "UBIGINT"),
)

#: The span log's tables, in their own file (:mod:`tracescorer.store.duckdb.layout`); the main database
#: has views of the same names.
SPAN_LOG_TABLES: dict[str, Columns] = {
    "spans": SPAN_COLUMNS,
    "log_records": LOG_COLUMNS,
    "skipped_traces": SKIPPED_COLUMNS,
}

#: The main database's tables.
TABLES: dict[str, Columns] = {
    "runs": RUN_COLUMNS,
    "assembled_traces": ASSEMBLED_COLUMNS,
    "scores": SCORE_COLUMNS,
    "scoring_decisions": DECISION_COLUMNS,
}


INDEXES: tuple[str, ...] = ("CREATE INDEX IF NOT EXISTS runs_trace ON runs (trace_id)",)


_POSTGRES_TYPES = {
    "VARCHAR": "text",
    "JSON": "json",  # the text as written: lossless, and ->> works in queries
    "DOUBLE": "double precision",
    "BIGINT": "bigint",
    "BIGINT[]": "bigint[]",
    "UBIGINT": "bigint",  # nanosecond times: values beyond 2^63 are clamped on the way in
    "INTEGER": "integer",
    "BOOLEAN": "boolean",
    "TIMESTAMPTZ": "timestamptz",
}


def column_type(declared: str, dialect: str = "duckdb") -> str:
    """A declaration (``VARCHAR NOT NULL``, ``UBIGINT``) in ``dialect``'s terms (``duckdb`` | ``postgres``)."""
    if dialect == "duckdb":
        return declared
    base, _, rest = declared.partition(" ")
    if base not in _POSTGRES_TYPES:
        raise TypeError(f"no PostgreSQL type for {declared!r}")
    return f"{_POSTGRES_TYPES[base]} {rest}".strip()


def create_table(
    table: str,
    columns: Columns,
    catalog: str | None = None,
    *,
    dialect: str = "duckdb",
    primary_key: tuple[str, ...] = (),
) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for a declaration, in ``dialect`` (``primary_key``: a key of
    several columns)."""
    body = [f"{name} {column_type(kind, dialect)}" for name, kind in columns]
    if primary_key:
        body.append(f"PRIMARY KEY ({', '.join(primary_key)})")
    joined = ",\n  ".join(body)
    return f"CREATE TABLE IF NOT EXISTS {catalog + '.' if catalog else ''}{table} (\n  {joined}\n)"


def delivery_table(dialect: str = "duckdb") -> str:
    return create_table("score_deliveries", DELIVERY_COLUMNS, dialect=dialect, primary_key=DELIVERY_KEY)


def monitor_tables(dialect: str = "duckdb") -> tuple[str, str]:
    return (
        create_table("monitor_state", MONITOR_STATE_COLUMNS, dialect=dialect),
        create_table("monitor_events", MONITOR_EVENT_COLUMNS, dialect=dialect),
    )


def coordination_tables(dialect: str = "duckdb") -> tuple[str, str]:
    """``conversation_activity`` and ``judge_tokens`` in ``dialect`` (PostgreSQL's baseline declares
    the same columns, with a partial index on the due conversations)."""
    return (
        create_table("conversation_activity", CONVERSATION_ACTIVITY_COLUMNS, dialect=dialect),
        create_table("judge_tokens", JUDGE_TOKEN_COLUMNS, dialect=dialect),
    )


def monitor_state_upgrade(dialect: str = "duckdb") -> tuple[str, ...]:
    """Add the :data:`MONITOR_STATE_V7` columns to an older ``monitor_state`` and fill them from
    the older columns: a firing that was notified stays told (no repeat after the upgrade), one that
    was not (held back by the old cooldown) is told once its cooldown ended."""
    types = dict(MONITOR_STATE_COLUMNS)
    added = tuple(
        f"ALTER TABLE monitor_state ADD COLUMN IF NOT EXISTS {name} {column_type(types[name], dialect)}"
        for name in MONITOR_STATE_V7
    )
    return (
        *added,
        "UPDATE monitor_state SET reminders = 0, resolved_at = CASE WHEN state = 'resolved' THEN since END, "
        "notified_state = CASE WHEN NOT coalesce(firing_notified, false) THEN NULL "
        "WHEN state = 'firing' THEN 'firing' ELSE 'resolved' END WHERE reminders IS NULL",
    )


def column_names(columns: Columns) -> list[str]:
    return [name for name, _ in columns]
