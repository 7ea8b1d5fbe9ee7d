"""One daemon of several does a job (the built-in monitors): a PostgreSQL session advisory lock.

The lock lives as long as the session on a dedicated connection: a daemon that stops, crashes or
loses its connection drops it, and another daemon's next attempt takes it over. No lease timing
is involved, so two daemons never hold it at once.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


class AdvisoryLeader:
    """``await try_acquire()`` until True; ``await held()`` now and then; ``await release()``."""

    def __init__(self, dsn: str, name: str, *, connect_timeout_s: float = 10.0) -> None:
        self._dsn = dsn
        self.name = name
        self._connect_timeout_s = connect_timeout_s
        self._conn: Any = None

    @property
    def leading(self) -> bool:
        return self._conn is not None

    async def try_acquire(self) -> bool:
        import psycopg

        try:
            conn = await psycopg.AsyncConnection.connect(
                self._dsn, autocommit=True, connect_timeout=int(self._connect_timeout_s)
            )
        except psycopg.Error as exc:
            log.debug("leader %s: cannot connect: %s", self.name, exc)
            return False
        try:
            cur = await conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", [f"tracescorer.{self.name}"])
            row = await cur.fetchone()
        except psycopg.Error:
            await conn.close()
            return False
        if row and row[0]:
            self._conn = conn
            return True
        await conn.close()
        return False

    async def held(self) -> bool:
        """Whether the lock is still ours (its connection answers)."""
        import psycopg

        if self._conn is None:
            return False
        try:
            await self._conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            await self._drop()
            return False

    async def release(self) -> None:
        await self._drop()

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
