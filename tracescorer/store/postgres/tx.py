"""What a PostgreSQL result store part asks of the pool: one transaction per call, and who it is.

Each part (runs and scores, deliveries, monitors, coordination, queries) is a mixin of
:class:`~tracescorer.store.postgres.store.PostgresResultStore` holding its methods and the SQL
they run, as async functions ``op(conn, *args)`` inside the transaction :meth:`Tx._tx` opens.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Tx:
    """Implemented by :class:`~tracescorer.store.postgres.pool.Pool`."""

    schema: str
    instance_id: str
    owner: str
    stats: dict[str, int]
    _pool: Any
    _closing: bool
    _query_role: str | None

    async def _tx(self, fn: Callable[..., Awaitable[T]], *args: Any, write: bool = True) -> T:
        """Run ``fn(conn, *args)`` in one transaction; retry transient failures."""
        raise NotImplementedError
