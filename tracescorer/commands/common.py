"""What the read commands share: settings, time filters, running a user's query (``tracescorer
query``; the commands' own reads are typed calls, :mod:`tracescorer.commands.reads`).

Imports stay light here (click and the standard library at module level): every command of
the CLI imports this module, and ``tracescorer --help`` must start quickly.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from tracescorer.config import Settings
    from tracescorer.control import ServeInfo

T = TypeVar("T")

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    envvar="TRACESCORER_CONFIG",
    help="YAML config file (default: built-in defaults + TRACESCORER_* env).",
)

#: ``--format`` choices of the read commands (``tracescorer.output.FORMATS``, without importing it).
FORMAT_NAMES = ["csv", "json", "jsonl", "table"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# A daemon that is starting holds the database lock before it publishes its state file.
_LOCK_WAIT_S = 5.0


def load(config_path: str | None, *, reading: bool = True) -> Settings:
    """The settings; ``reading`` (the read commands): variables only the judge, export and
    notify targets use may be unset (``serve`` and ``check-config`` pass False)."""
    from tracescorer.config import ConfigError, load_settings

    try:
        return load_settings(config_path, reading=reading)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def parse_since(value: str, *, now: dt.datetime | None = None) -> dt.datetime:
    """``30m``, ``2h``, ``7d``, ``1w`` before now, or an ISO 8601 timestamp (UTC if no zone)."""
    now = now or dt.datetime.now(dt.UTC)
    m = _DURATION.match(value)
    if m:
        return now - dt.timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])
    try:
        parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"{value!r}: use a duration like 30m, 2h, 7d or an ISO 8601 time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def row_limit(settings: Settings, requested: int | None) -> int:
    """The ``--limit`` asked for, capped at ``store.query_max_rows``."""
    return min(requested or settings.store.query_max_rows, settings.store.query_max_rows)


def run_query(settings: Settings, sql: str, max_rows: int, params: Sequence[Any] = ()) -> dict[str, Any]:
    """Run a user's read-only query through the running daemon, or on the store when none runs
    (:func:`daemon_or_store`). Returns ``{columns, types, rows, truncated}``."""
    import asyncio

    from tracescorer import control

    def remote(info: control.ServeInfo) -> dict[str, Any]:
        return control.remote_query(
            info, sql, max_rows=max_rows, timeout_s=settings.store.query_timeout_s + 10, params=params
        )

    async def offline() -> dict[str, Any]:
        # only without a daemon: the store's modules (DuckDB among them) cost a read through the daemon 0.1 s
        from tracescorer.store.factory import build_offline_queries

        result = await build_offline_queries(settings).query(
            sql, max_rows=max_rows, timeout_s=settings.store.query_timeout_s, params=params
        )
        return {"columns": result.columns, "types": result.types, "rows": result.rows, "truncated": result.truncated}

    return asyncio.run(daemon_or_store(settings, remote, offline))


async def daemon_or_store(
    settings: Settings, remote: Callable[[ServeInfo], T], offline: Callable[[], Awaitable[T]]
) -> T:
    """``remote`` (blocking: run in a thread) through the running daemon, or ``offline`` on the
    store when none runs.

    While the state file names a live daemon it always goes through it (never the locked file); a
    file locked by a daemon that is starting is waited for a moment. The daemon's or the store's
    errors are raised as ``click.ClickException``.
    """
    import asyncio

    from tracescorer import control

    path = settings.store.path
    deadline = time.monotonic() + _LOCK_WAIT_S
    while True:
        info = control.read_serve_info(path)
        if info is not None:
            try:
                return await asyncio.to_thread(remote, info)
            except control.DaemonUnreachable as exc:
                if control.read_serve_info(path) is None:
                    continue  # it stopped meanwhile: the file is free now
                raise click.ClickException(str(exc)) from None
            except control.RemoteQueryError as exc:
                raise click.ClickException(str(exc)) from None
        if (missing := _no_database(settings)) is not None:  # the read-only open would say only that
            raise click.ClickException(missing)
        from tracescorer.store.api import StoreError, StoreLocked  # only here: heavy, and not needed through a daemon

        try:
            return await offline()
        except StoreLocked as exc:
            if time.monotonic() < deadline:
                await asyncio.sleep(0.1)  # a daemon is starting: its state file appears in a moment
                continue
            raise click.ClickException(
                f"{path} is locked by another process and no running tracescorer daemon is registered for it "
                f"({control.serve_info_path(path)} is missing): {exc}. If a daemon is starting, try again; "
                "otherwise stop the process that holds the file"
            ) from None
        except StoreError as exc:
            raise click.ClickException(str(exc)) from None


def _no_database(settings: Settings) -> str | None:
    """What to do when no daemon serves ``store.path`` and no database is there (None: it is)."""
    path = settings.store.path
    if settings.store.backend != "duckdb" or path == ":memory:" or os.path.exists(path):
        return None
    # the command's --config (or TRACESCORER_CONFIG), to say where store.path came from
    context = click.get_current_context(silent=True)
    config = context.params.get("config_path") if context is not None else None
    if os.environ.get("TRACESCORER_STORE__PATH"):
        where = "store.path from TRACESCORER_STORE__PATH"
    elif config:
        where = f"store.path of {config}"
    else:
        where = "store.path's default (no --config given, nor TRACESCORER_CONFIG), relative to the working directory"
    return (
        f"no database at {os.path.abspath(path)} ({where}) and no daemon serving it. Give the command the "
        "configuration `tracescorer serve` runs with: --config FILE (or TRACESCORER_CONFIG=FILE)"
    )


_SPAN_LOG = re.compile(r"\b(spans|log_records|assembled_traces)\b", re.IGNORECASE)


def span_log_note(sql: str) -> str | None:
    """postgres mode: the reminder that span-log tables hold this daemon's telemetry only."""
    if not _SPAN_LOG.search(sql):
        return None
    return (
        "# spans, log_records and assembled_traces are this daemon's span log: in postgres mode every daemon "
        "keeps its own (runs, scores and decisions are shared)"
    )


def as_datetime(value: Any) -> dt.datetime:
    """A timestamp cell as an aware datetime: results through the daemon carry ISO 8601 text."""
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    parsed = dt.datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
