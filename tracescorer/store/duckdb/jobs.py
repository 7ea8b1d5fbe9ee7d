"""What a DuckDB store part asks of its store process, and how a write job tells the process to batch it.

A part (span log, runs, scores, deliveries, monitors, retention) is a mixin of
:class:`~tracescorer.store.duckdb.store.DuckDBStore` holding its daemon-side methods and the
functions they send to the store process: each such function is ``op(con, *args)`` of picklable
arguments returning plain data, sent by name; writes run inside the writer's group-committed
transaction, reads on a reader cursor. Rows travel as tuples and JSON text: turning them into
domain objects is the daemon's job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

Row = tuple[Any, ...]
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class Jobs:
    """The two requests every part uses (implemented by :class:`~tracescorer.store.duckdb.process.StoreProcess`)."""

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(connection, *args)`` in the store process inside a group-committed write
        transaction; returns its result once committed."""
        raise NotImplementedError

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(cursor, *args)`` on a read cursor of the store process (committed data only)."""
        raise NotImplementedError

    async def _request(self, kind: str, payload: Any, items: int = 0) -> Any:
        """Send one request of ``kind`` (telemetry counts ``items`` against the intake bound)."""
        raise NotImplementedError


def coalescable(fn: F) -> F:
    """Mark a write whose arguments are all lists: the store process runs the jobs of one group
    commit that call it as one call on the concatenated lists (a statement costs ~2 ms however
    few rows it writes)."""
    fn.coalescable = True  # type: ignore[attr-defined]
    return fn


def hinted(count: int = 1) -> Callable[[F], F]:
    """Mark a write whose last ``count`` arguments list, per row of a table, whether the caller
    believes the row's key is not stored yet (a trace assembled for the first time): such rows
    are inserted without looking their key up. A wrong belief (a restart forgot the trace was
    assembled) fails the insert on the primary key; the writer then runs the job again with no
    beliefs."""

    def mark(fn: F) -> F:
        fn.hinted = count  # type: ignore[attr-defined]
        return fn

    return mark


def alone(fn: F) -> F:
    """Mark a write that runs in a transaction of its own, never batched with others: it writes a
    span log, and a DuckDB transaction writes one database file only."""
    fn.alone = True  # type: ignore[attr-defined]
    return fn


def prompt(fn: F) -> F:
    """Mark a write a caller waits on to go on (a claim, a judge token): the writer commits it
    without the results delay (``store.results_delay_s``), with whatever is queued before it."""
    fn.prompt = True  # type: ignore[attr-defined]
    return fn
