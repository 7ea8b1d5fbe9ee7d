"""The PostgreSQL result tables: the same names and columns as the DuckDB store, PostgreSQL types.

``runs``, ``scores`` and ``scoring_decisions`` derive from the column declarations of
:mod:`tracescorer.store.tables` (each row shape is declared once); the delivery and monitor tables
are declared in :mod:`tracescorer.store.tables` too. Tables that
exist only here coordinate several daemons:

- ``conversation_activity``: when each conversation last got a run (the database's clock, so "idle
  for ``conversation_idle_s``" holds across daemons), which activity was last scored, and the
  claim (lease) of the daemon scoring it now;
- ``judge_spend``: judge USD per UTC day, added to in the transaction that stores the scores;
- ``judge_tokens``: the shared requests-per-minute token bucket;
- ``daemons``: one row per daemon instance (its span log), stamped at start, for operators.

JSON columns are ``json`` (the text as written: lossless, and ``->>`` works in queries).
"""

from __future__ import annotations

from tracescorer.store import tables
from tracescorer.store.tables import DECISION_COLUMNS, RUN_COLUMNS, SCORE_COLUMNS, Columns


def create_table(table: str, columns: Columns) -> str:
    return tables.create_table(table, columns, dialect="postgres")


RESULT_TABLES: dict[str, Columns] = {
    "runs": (*RUN_COLUMNS, ("assembled_by", "VARCHAR")),
    "scores": SCORE_COLUMNS,
    "scoring_decisions": DECISION_COLUMNS,
}

# the tables read commands may query (span-log tables are per daemon, in its DuckDB file)
QUERYABLE = (
    "runs",
    "scores",
    "scoring_decisions",
    "score_deliveries",
    "monitor_state",
    "monitor_events",
    "conversation_activity",
    "judge_spend",
    "daemons",
    "labels",
    "evaluations",
)

BASELINE: tuple[str, ...] = (
    *(create_table(name, cols) for name, cols in RESULT_TABLES.items()),
    "CREATE INDEX IF NOT EXISTS runs_trace ON runs (trace_id)",
    "CREATE INDEX IF NOT EXISTS runs_conversation ON runs (conversation_id) WHERE conversation_id IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS runs_updated ON runs (updated_at)",
    "CREATE INDEX IF NOT EXISTS runs_started ON runs (started_at)",
    "CREATE INDEX IF NOT EXISTS scores_updated ON scores (updated_at, id)",
    "CREATE INDEX IF NOT EXISTS decisions_target ON scoring_decisions (target_type, target_id)",
    tables.delivery_table("postgres"),
    *tables.monitor_tables("postgres"),
    "CREATE INDEX IF NOT EXISTS monitor_events_at ON monitor_events (event_at)",
    """CREATE TABLE IF NOT EXISTS conversation_activity (
  conversation_id text PRIMARY KEY,
  last_activity timestamptz NOT NULL,   -- when a run of it was last stored (database clock)
  activity_seq bigint NOT NULL,         -- counts those writes: the version a scoring covers
  scored_seq bigint,                    -- activity_seq covered by the last finished scoring
  scored_at timestamptz,
  claimed_by text,                      -- the daemon scoring it now ...
  claimed_until timestamptz,            -- ... until this lease runs out (renewed while it works)
  takeovers integer NOT NULL DEFAULT 0  -- claims taken from a daemon whose lease had run out
)""",
    "CREATE INDEX IF NOT EXISTS conversation_due ON conversation_activity (last_activity) "
    "WHERE scored_seq IS NULL OR scored_seq < activity_seq",
    """CREATE TABLE IF NOT EXISTS judge_spend (
  day date PRIMARY KEY,                 -- UTC day
  spent_usd double precision NOT NULL,
  updated_at timestamptz NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS judge_tokens (
  bucket text PRIMARY KEY,
  tokens double precision NOT NULL,
  updated_at timestamptz NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS daemons (
  instance_id text PRIMARY KEY,         -- a daemon's span log (stable across its restarts)
  owner text NOT NULL,                  -- the running process's claim id
  host text,
  started_at timestamptz NOT NULL,
  seen_at timestamptz NOT NULL
)""",
)
