"""The PostgreSQL result tables: the same names and columns as the DuckDB store, PostgreSQL types.

``runs``, ``scores`` and ``scoring_decisions`` derive from the column declarations of
:mod:`tracescorer.store.schema` (each row shape is declared once); the delivery and monitor tables
mirror :mod:`tracescorer.store.duckdb.deliveries` and :mod:`tracescorer.store.duckdb.monitor_tables`. Tables that
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

from tracescorer.store.schema import DECISION_COLUMNS, RUN_COLUMNS, SCORE_COLUMNS, Columns

_TYPES = {
    "VARCHAR": "text",
    "JSON": "json",
    "DOUBLE": "double precision",
    "BIGINT": "bigint",
    "UBIGINT": "bigint",  # nanosecond times: values beyond 2^63 are clamped on the way in
    "INTEGER": "integer",
    "BOOLEAN": "boolean",
    "TIMESTAMPTZ": "timestamptz",
}


def pg_type(declared: str) -> str:
    """A DuckDB column declaration (``VARCHAR NOT NULL``, ``UBIGINT``) in PostgreSQL terms."""
    base, _, rest = declared.partition(" ")
    if base not in _TYPES:
        raise TypeError(f"no PostgreSQL type for {declared!r}")
    return f"{_TYPES[base]} {rest}".strip()


def create_table(table: str, columns: Columns) -> str:
    body = ",\n  ".join(f"{name} {pg_type(kind)}" for name, kind in columns)
    return f"CREATE TABLE IF NOT EXISTS {table} (\n  {body}\n)"


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
)

BASELINE: tuple[str, ...] = (
    *(create_table(name, cols) for name, cols in RESULT_TABLES.items()),
    "CREATE INDEX IF NOT EXISTS runs_trace ON runs (trace_id)",
    "CREATE INDEX IF NOT EXISTS runs_conversation ON runs (conversation_id) WHERE conversation_id IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS runs_updated ON runs (updated_at)",
    "CREATE INDEX IF NOT EXISTS runs_started ON runs (started_at)",
    "CREATE INDEX IF NOT EXISTS scores_updated ON scores (updated_at, id)",
    "CREATE INDEX IF NOT EXISTS decisions_target ON scoring_decisions (target_type, target_id)",
    """CREATE TABLE IF NOT EXISTS score_deliveries (
  score_id text NOT NULL,
  sink text NOT NULL,
  score_version bigint NOT NULL,
  status text NOT NULL,
  attempts integer NOT NULL,
  next_attempt_at timestamptz,
  last_error text,
  last_attempt_at timestamptz,
  delivered_at timestamptz,
  delivered_version bigint,
  claimed_by text,
  claimed_until timestamptz,
  PRIMARY KEY (score_id, sink)
)""",
    """CREATE TABLE IF NOT EXISTS monitor_state (
  monitor_id text PRIMARY KEY,
  state text NOT NULL,
  since timestamptz,
  value double precision,
  samples bigint,
  evaluated_at timestamptz,
  notified_at timestamptz,
  firing_notified boolean,
  pending text,
  updated_at timestamptz
)""",
    """CREATE TABLE IF NOT EXISTS monitor_events (
  monitor_id text NOT NULL,
  event_at timestamptz NOT NULL,
  event text NOT NULL,
  state text,
  value double precision,
  samples bigint,
  target text,
  detail text
)""",
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
