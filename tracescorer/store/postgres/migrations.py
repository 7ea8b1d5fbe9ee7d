"""Versioned schema of the PostgreSQL result store (its own versions, like the DuckDB store's).

``schema_info`` in the store's schema holds the version. Version 1 is :data:`schema.BASELINE`;
each later :class:`Migration` upgrades from the version before it, and a fresh database gets the
baseline plus every migration. Daemons starting together serialise on a transaction-scoped
advisory lock, so one migrates and the others find the work done. A database whose version is
newer than this tracescorer knows is refused with a clear error.

The query role (``store.postgres.query_role``) is created here when the connected user may
create roles, and granted SELECT on the product tables; otherwise a DBA creates it (docs/runbook.md
shows the statements) and queries run without it until then.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from tracescorer.store.api import SchemaError
from tracescorer.store.duckdb.migrations import Migration
from tracescorer.store.postgres.query import quote_ident
from tracescorer.store.postgres.schema import BASELINE, QUERYABLE
from tracescorer.store.tables import calibration_tables, judge_batch_table, monitor_state_upgrade, verdict_table

log = logging.getLogger(__name__)

BASELINE_VERSION = 1

#: Upgrades, oldest first; version N upgrades a schema at version N-1 (a fresh schema gets the
#: baseline, which already has the latest columns, plus every migration: written to run on it too).
MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        2,
        "monitors: pending period, keep-firing period, what the targets were last told, reminders",
        monitor_state_upgrade("postgres"),
    ),
    Migration(
        3,
        "scores remember when what they scored ended (history is keyed on it; older rows use updated_at)",
        ("ALTER TABLE scores ADD COLUMN IF NOT EXISTS target_ended_at timestamptz",),
    ),
    Migration(
        4,
        "scorer versions on scores; human labels and other tools' evaluations",
        ("ALTER TABLE scores ADD COLUMN IF NOT EXISTS scorer_version text", *calibration_tables("postgres")),
    ),
    Migration(
        5,
        "error scores say whether their error was transient, and how often they were re-scored (healing)",
        (
            "ALTER TABLE scores ADD COLUMN IF NOT EXISTS error_class text",
            "ALTER TABLE scores ADD COLUMN IF NOT EXISTS heal_attempts integer",
        ),
    ),
    Migration(
        6,
        "conversation scores name the activity they were computed for (a late write of an older one loses)",
        ("ALTER TABLE scores ADD COLUMN IF NOT EXISTS activity_seq bigint",),
    ),
    Migration(
        7,
        "judge verdicts kept for reuse; scores count the judge calls an earlier verdict answered",
        (*verdict_table("postgres"), "ALTER TABLE scores ADD COLUMN IF NOT EXISTS judge_reused integer"),
    ),
    Migration(8, "provider batches of judge requests (judge mode: batch)", (judge_batch_table("postgres"),)),
)

_LOCK = "hashtext('tracescorer.schema')"


def latest_version(migrations: Sequence[Migration] = MIGRATIONS) -> int:
    return max([BASELINE_VERSION, *(m.version for m in migrations)])


async def migrate(conn: Any, schema: str, migrations: Sequence[Migration] = MIGRATIONS) -> tuple[int | None, int]:
    """Create or upgrade the schema in one transaction; returns (version found, version now)."""
    target = latest_version(migrations)
    ident = quote_ident(schema)
    async with conn.transaction():
        await conn.execute(f"SELECT pg_advisory_xact_lock({_LOCK})")
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {ident}")
        await conn.execute("SELECT set_config('search_path', %s, true)", [ident])
        cur = await conn.execute("SELECT to_regclass('schema_info') IS NOT NULL")
        exists = (await cur.fetchone())[0]
        found: int | None = None
        if exists:
            cur = await conn.execute("SELECT value FROM schema_info WHERE key = 'version'")
            row = await cur.fetchone()
            found = int(row[0]) if row else None
        if found is not None and found > target:
            raise SchemaError(
                f"the PostgreSQL schema {schema!r} is version {found}, newer than this tracescorer "
                f"understands ({target}); upgrade tracescorer or use another store.postgres.schema_name"
            )
        if found is None:
            for statement in BASELINE:
                await conn.execute(statement)
            for migration in sorted(migrations, key=lambda m: m.version):
                for statement in migration.statements:
                    await conn.execute(statement)
            await conn.execute("CREATE TABLE IF NOT EXISTS schema_info (key text PRIMARY KEY, value text)")
            await conn.execute(
                "INSERT INTO schema_info VALUES ('version', %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [str(target)],
            )
        elif found < target:
            for migration in sorted(migrations, key=lambda m: m.version):
                if migration.version > found:
                    for statement in migration.statements:
                        await conn.execute(statement)
            await conn.execute("UPDATE schema_info SET value = %s WHERE key = 'version'", [str(target)])
    return found, target


async def ensure_query_role(conn: Any, schema: str, role: str) -> bool:
    """Make ``role`` a SELECT-only role on the product tables that the connected user can switch
    to; False (and a warning) when the user may not create or use it."""
    ident, role_ident = quote_ident(schema), quote_ident(role)
    cur = await conn.execute("SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user")
    row = await cur.fetchone()
    may_create = bool(row and row[0])
    cur = await conn.execute("SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = %s)", [role])
    exists = bool((await cur.fetchone())[0])
    if may_create:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('tracescorer.role'))")
            cur = await conn.execute("SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = %s)", [role])
            if not (await cur.fetchone())[0]:
                try:
                    async with conn.transaction():
                        await conn.execute(f"CREATE ROLE {role_ident} NOLOGIN NOSUPERUSER NOINHERIT")
                except Exception as exc:  # noqa: BLE001 - another database of the cluster made it meanwhile
                    log.debug("create role %s: %s", role, exc)
            await conn.execute(f"GRANT USAGE ON SCHEMA {ident} TO {role_ident}")
            tables = ", ".join(f"{ident}.{t}" for t in QUERYABLE)
            await conn.execute(f"GRANT SELECT ON {tables} TO {role_ident}")
            cur = await conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
            if not (await cur.fetchone())[0]:
                await conn.execute(f"GRANT {role_ident} TO CURRENT_USER")
        exists = True
    if not exists:
        log.warning(
            "store.postgres.query_role %r does not exist and user may not create roles: read-only queries "
            "run as the daemon's user (READ ONLY transaction and the statement guard still apply); create "
            "the role as shown in docs/runbook.md for the extra isolation",
            role,
        )
        return False
    cur = await conn.execute("SELECT pg_has_role(current_user, %s, 'MEMBER')", [role])
    usable = bool((await cur.fetchone())[0])
    if not usable:
        log.warning(
            "store.postgres.query_role %r exists but %s cannot SET ROLE to it (GRANT %s TO <user>): "
            "queries run as the daemon's user",
            role,
            "the daemon's user",
            role,
        )
    return usable
