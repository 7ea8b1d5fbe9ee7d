"""Store operations only tests use; they run inside the store process (tests put this folder on
PYTHONPATH, see tests/conftest.py)."""

from __future__ import annotations

import os
import time
from typing import Any


def hold_writer(con: Any, started: str, release: str, timeout_s: float) -> bool:
    """Occupy the writer (inside its transaction) until the ``release`` file exists."""
    with open(started, "w"):
        pass
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(release):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


hold_writer.telemetry_writer = True  # type: ignore[attr-defined]  # the writer clients wait for


def raise_error(con: Any, message: str) -> None:
    raise RuntimeError(message)


def execute(con: Any, sql: str, params: list[Any]) -> None:
    """Any statement inside the writer's transaction (tests set up rows the pipeline would write)."""
    con.execute(sql, params)


def span_log_counts(con: Any) -> list[int]:
    """Span rows in each span log file."""
    from tracescorer.store.duckdb.layout import SPAN_LOGS

    return [con.execute(f"SELECT count(*) FROM {catalog}.spans").fetchall()[0][0] for catalog in SPAN_LOGS]


def noop(con: Any) -> None:
    """A read that returns once every request sent before it reached the store process's queues."""


def rows(con: Any, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in con.execute(sql, params).fetchall()]


def checkpoint(con: Any, catalogs: list[str]) -> list[str]:
    """CHECKPOINT each of ``catalogs``; returns the errors."""
    errors = []
    for catalog in catalogs:
        try:
            con.execute(f'CHECKPOINT "{catalog}"')
        except Exception as exc:  # what the test looks at
            errors.append(str(exc))
    return errors


def main_catalog(con: Any) -> str:
    return str(con.execute("SELECT current_database()").fetchall()[0][0])
