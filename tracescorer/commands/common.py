"""What the read commands share: settings, SQL literals, time filters, running a query."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import click

from tracescorer import control
from tracescorer.config import ConfigError, Settings, load_settings
from tracescorer.store.duckdb import StoreError, open_read_only, run_read_query

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    envvar="TRACESCORER_CONFIG",
    help="YAML config file (default: built-in defaults + TRACESCORER_* env).",
)

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def load(config_path: str | None) -> Settings:
    try:
        return load_settings(config_path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def sql_str(value: str) -> str:
    """A SQL string literal (the query endpoint takes SQL text, not parameters)."""
    return "'" + value.replace("'", "''") + "'"


def parse_since(value: str, *, now: dt.datetime | None = None) -> dt.datetime:
    """``30m``, ``2h``, ``7d``, ``1w`` before now, or an ISO 8601 timestamp (UTC if no zone)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    m = _DURATION.match(value)
    if m:
        return now - dt.timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])
    try:
        parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"{value!r}: use a duration like 30m, 2h, 7d or an ISO 8601 time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def time_literal(value: dt.datetime) -> str:
    return f"TIMESTAMPTZ {sql_str(value.isoformat())}"


def where_sql(clauses: list[str]) -> str:
    """`` WHERE a AND b`` (empty when there are no clauses)."""
    return f" WHERE {' AND '.join(clauses)}" if clauses else ""


def row_limit(settings: Settings, requested: int | None) -> int:
    """The ``--limit`` asked for, capped at ``store.query_max_rows``."""
    return min(requested or settings.store.query_max_rows, settings.store.query_max_rows)


def run_query(settings: Settings, sql: str, max_rows: int) -> dict[str, Any]:
    """Run read-only SQL through the running daemon, or on the file when none runs.

    Returns ``{columns, types, rows, truncated}``.
    """
    path = settings.store.path
    info = control.read_serve_info(path)
    if info is not None:
        try:
            return control.remote_query(info, sql, max_rows=max_rows, timeout_s=settings.store.query_timeout_s + 5)
        except control.DaemonUnreachable:
            pass  # a stale state file (daemon killed, pid reused): the file itself may be readable
        except control.RemoteQueryError as exc:
            raise click.ClickException(str(exc)) from None
    try:
        con = open_read_only(path)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        result = run_read_query(con, sql, max_rows=max_rows, timeout_s=settings.store.query_timeout_s)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        con.close()
    return {"columns": result.columns, "types": result.types, "rows": result.rows, "truncated": result.truncated}
