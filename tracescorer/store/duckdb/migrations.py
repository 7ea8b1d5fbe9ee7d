"""Versioned schema: a new database is created at the latest version, an older one is upgraded.

``schema_info`` holds the version. Version 1 is the schema of the first release; each
:class:`Migration` upgrades from the version before it. The tables in
:mod:`tracescorer.store.tables` always describe the latest version, and a test checks that
version 1 plus every migration gives exactly that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tracescorer.store.api import SchemaError
from tracescorer.store.duckdb import layout
from tracescorer.store.duckdb.layout import SPAN_LOGS
from tracescorer.store.tables import (
    INDEXES,
    SPAN_LOG_TABLES,
    TABLES,
    calibration_tables,
    column_names,
    coordination_tables,
    create_table,
    delivery_table,
    judge_batch_table,
    monitor_state_upgrade,
    monitor_tables,
    verdict_table,
)


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


#: Upgrades, oldest first; version N upgrades a database at version N-1. Statements are written
#: so that they can also run on a fresh database created from :mod:`schema` (``IF NOT EXISTS``):
#: a new database is the tables of :mod:`schema` plus every migration.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(2, "delivery state of exported scores, per export sink", (delivery_table(),)),
    Migration(3, "state and events of the built-in monitors", monitor_tables()),
    Migration(
        4,
        "assembly records remember the newest item they assembled",
        ("ALTER TABLE assembled_traces ADD COLUMN IF NOT EXISTS last_received_at TIMESTAMPTZ",),
    ),
    Migration(
        5,
        "delivery rows are looked up by score",
        ("CREATE INDEX IF NOT EXISTS score_deliveries_score ON score_deliveries (score_id)",),
    ),
    # the rows were copied to the first span log before this runs (_span_logs)
    Migration(
        6,
        "the span log in two files of its own, read through views",
        tuple(
            statement
            for name in reversed(SPAN_LOG_TABLES)
            for statement in (f"DROP TABLE IF EXISTS {name}", layout.union_view(name))
            if name != "skipped_traces"
        ),
    ),
    Migration(
        7,
        "monitors: pending period, keep-firing period, what the targets were last told, reminders",
        monitor_state_upgrade(),
    ),
    Migration(
        8,
        "scores remember when what they scored ended (history is keyed on it; older rows use updated_at)",
        ("ALTER TABLE scores ADD COLUMN IF NOT EXISTS target_ended_at TIMESTAMPTZ",),
    ),
    Migration(
        9,
        "scorer versions on scores; human labels and other tools' evaluations",
        ("ALTER TABLE scores ADD COLUMN IF NOT EXISTS scorer_version VARCHAR", *calibration_tables()),
    ),
    Migration(10, "traces triage skipped, read through a view", (layout.union_view("skipped_traces"),)),
    Migration(
        11,
        "error scores say whether their error was transient, and how often they were re-scored (healing)",
        (
            "ALTER TABLE scores ADD COLUMN IF NOT EXISTS error_class VARCHAR",
            "ALTER TABLE scores ADD COLUMN IF NOT EXISTS heal_attempts INTEGER",
        ),
    ),
    Migration(
        12,
        "worker processes coordinate through the store: conversation activity and claims, judge token buckets",
        coordination_tables(),
    ),
    Migration(
        13,
        "assembly records name the segment-log records of their items (store.spans: none)",
        ("ALTER TABLE assembled_traces ADD COLUMN IF NOT EXISTS log_offsets BIGINT[]",),
    ),
    Migration(
        14,
        "conversation scores name the activity they were computed for (a late write of an older one loses)",
        ("ALTER TABLE scores ADD COLUMN IF NOT EXISTS activity_seq BIGINT",),
    ),
    Migration(
        15,
        "worker processes no longer coordinate through the store (one owner per conversation and per rate share)",
        ("DROP TABLE IF EXISTS conversation_activity", "DROP TABLE IF EXISTS judge_tokens"),
    ),
    Migration(
        16,
        "judge verdicts kept for reuse; scores count the judge calls an earlier verdict answered",
        (*verdict_table(), "ALTER TABLE scores ADD COLUMN IF NOT EXISTS judge_reused INTEGER"),
    ),
    Migration(17, "provider batches of judge requests (judge mode: batch)", (judge_batch_table(),)),
)

BASELINE_VERSION = 1


def latest_version(migrations: Sequence[Migration] = MIGRATIONS) -> int:
    return max([BASELINE_VERSION, *(m.version for m in migrations)])


def create_statements() -> list[str]:
    """Every table and index at the latest version."""
    return [*(create_table(name, cols) for name, cols in TABLES.items()), *INDEXES]


def _version(con: Any) -> int | None:
    found = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_catalog = current_database() "
        "AND table_name = 'schema_info'"
    ).fetchall()
    if not found or not found[0][0]:
        return None
    row = con.execute("SELECT value FROM schema_info WHERE key = 'version'").fetchall()
    return int(row[0][0]) if row else None


def _span_logs(con: Any) -> None:
    """Create the span-log tables in each attached span log, one transaction each (DuckDB writes
    one database per transaction); a database from before the split has its rows copied to the
    first (again after a crash between the copy and the main upgrade: the copy replaces what an
    earlier one left). Columns added since are added here too (``IF NOT EXISTS``: every open)."""
    copy = layout.holds_span_log(con)
    main = layout.main_catalog(con)
    for catalog in SPAN_LOGS:
        con.execute("BEGIN TRANSACTION")
        try:
            for name, columns in SPAN_LOG_TABLES.items():
                con.execute(create_table(name, columns, catalog))
                # added with the segment log: a span log of an earlier release gets it too (nulls)
                con.execute(f"ALTER TABLE {catalog}.{name} ADD COLUMN IF NOT EXISTS log_offset UBIGINT")
                if copy and catalog == SPAN_LOGS[0] and name in ("spans", "log_records"):
                    names = ", ".join(c for c in column_names(columns) if c != "log_offset")
                    con.execute(f"DELETE FROM {catalog}.{name}")
                    con.execute(
                        f"INSERT INTO {catalog}.{name} ({names}) SELECT {names} FROM {layout.quote(main)}.main.{name}"
                    )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise


def migrate(con: Any, migrations: Sequence[Migration] = MIGRATIONS) -> tuple[int | None, int]:
    """Create or upgrade the schema; returns (version found, version now).

    ``con`` is a DuckDB connection with the span logs attached (:func:`layout.attach`); the
    PostgreSQL store has its own tables. The span logs' tables are made (or filled) first, then
    the main database is upgraded in one transaction.
    """
    _span_logs(con)
    target = latest_version(migrations)
    con.execute("BEGIN TRANSACTION")
    try:
        found = _version(con)
        if found is None:
            for statement in create_statements():
                con.execute(statement)
            for migration in sorted(migrations, key=lambda m: m.version):
                for statement in migration.statements:
                    con.execute(statement)
            con.execute("CREATE TABLE IF NOT EXISTS schema_info (key VARCHAR PRIMARY KEY, value VARCHAR)")
            con.execute("INSERT OR REPLACE INTO schema_info VALUES ('version', ?)", [str(target)])
        elif found > target:
            raise SchemaError(
                f"the database schema is version {found}, newer than this tracescorer understands "
                f"({target}); upgrade tracescorer or use another store.path"
            )
        else:
            for migration in sorted(migrations, key=lambda m: m.version):
                if migration.version > found:
                    for statement in migration.statements:
                        con.execute(statement)
            con.execute("UPDATE schema_info SET value = ? WHERE key = 'version'", [str(target)])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return found, target
