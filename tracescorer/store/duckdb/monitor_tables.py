"""Tables of the built-in monitors (created by the schema migrations, version 3)."""

from __future__ import annotations

DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS monitor_state (
  monitor_id VARCHAR PRIMARY KEY,
  state VARCHAR NOT NULL,
  since TIMESTAMPTZ,
  value DOUBLE,
  samples BIGINT,
  evaluated_at TIMESTAMPTZ,
  notified_at TIMESTAMPTZ,
  firing_notified BOOLEAN,
  pending VARCHAR,
  updated_at TIMESTAMPTZ
)""",
    """CREATE TABLE IF NOT EXISTS monitor_events (
  monitor_id VARCHAR NOT NULL,
  event_at TIMESTAMPTZ NOT NULL,
  event VARCHAR NOT NULL,
  state VARCHAR,
  value DOUBLE,
  samples BIGINT,
  target VARCHAR,
  detail VARCHAR
)""",
)
