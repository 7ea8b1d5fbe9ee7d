"""The PostgreSQL result store's connection pool: opening it, one retried transaction per call, closing it.

:class:`PostgresResultStore` implements :class:`~tracescorer.store.api.ResultStore` on an async
psycopg 3 connection pool, plus the coordination several daemons need
(:class:`~tracescorer.store.api.SharedCoordination`: conversation claims, the shared judge
token bucket, daemon registration). Every method runs one transaction on a pooled connection:
nothing blocks the event loop. A transaction that hits a serialization failure, a deadlock or a
dropped connection is retried a few times before the error becomes a :class:`StoreError`.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tracescorer.config import mask_dsn
from tracescorer.lifecycle import seconds_left
from tracescorer.store.api import (
    DataError,
    SchemaError,
    StoreClosed,
    StoreError,
)
from tracescorer.store.postgres import claims, migrations, query
from tracescorer.store.postgres.tx import Tx

log = logging.getLogger(__name__)
T = TypeVar("T")

_RETRIES = 3


def _configure_types(conn: Any) -> None:
    """JSON columns come back as their text (as from DuckDB): run rows decode them themselves."""
    from psycopg.types.string import TextLoader

    conn.adapters.register_loader("json", TextLoader)
    conn.adapters.register_loader("jsonb", TextLoader)


class Pool(Tx):
    """An async psycopg 3 connection pool on the store's schema (see the module docstring)."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "tracescorer",
        pool_min_size: int = 1,
        pool_max_size: int = 8,
        connect_timeout_s: float = 10.0,
        query_role: str | None = "tracescorer_query",
        instance_id: str = "",
        identity: Callable[[], Awaitable[str]] | None = None,
        owner: str = "",
        register: bool = True,
    ) -> None:
        self.dsn = dsn
        self.schema = schema
        #: names this daemon's span log: marks the runs it stored, finds the claims its previous process left
        self.instance_id = instance_id
        self._identity = identity  # where the instance id is kept (the span log's file), read at start
        self.owner = owner
        self._register = register  # a worker process claims under the daemon's registration
        self._min, self._max = pool_min_size, pool_max_size
        self._connect_timeout_s = connect_timeout_s
        self._query_role_name = query_role
        self._query_role: str | None = None
        self._pool: Any = None
        self._closing = False
        self._failure: str | None = None
        self.stats = {"transactions": 0, "rows": 0, "retries": 0}

    async def start(self) -> None:
        """Connect, migrate, set up the query role, register this daemon; raises :class:`StoreError`
        naming the problem."""
        import psycopg
        from psycopg_pool import AsyncConnectionPool

        if self._identity is not None:
            self.instance_id = await self._identity()
        schema = query.quote_ident(self.schema)

        async def configure(conn: Any) -> None:
            _configure_types(conn)
            await conn.execute("SELECT set_config('search_path', %s, false)", [schema])
            await conn.commit()

        try:
            async with await psycopg.AsyncConnection.connect(
                self.dsn, autocommit=True, connect_timeout=int(self._connect_timeout_s)
            ) as conn:
                found, now = await migrations.migrate(conn, self.schema)
                if found != now:
                    log.info(
                        "PostgreSQL schema %s %s version %d",
                        self.schema,
                        "created at" if found is None else f"upgraded from {found} to",
                        now,
                    )
                if self._query_role_name:
                    self._query_role = (
                        self._query_role_name
                        if await migrations.ensure_query_role(conn, self.schema, self._query_role_name)
                        else None
                    )
        except SchemaError as exc:
            raise StoreError(str(exc)) from None
        except psycopg.Error as exc:
            raise StoreError(f"cannot open PostgreSQL store {mask_dsn(self.dsn)}: {str(exc).strip()}") from None
        except OSError as exc:
            raise StoreError(f"cannot connect to PostgreSQL {mask_dsn(self.dsn)}: {exc}") from None
        self._pool = AsyncConnectionPool(
            self.dsn,
            min_size=self._min,
            max_size=self._max,
            open=False,
            configure=configure,
            timeout=self._connect_timeout_s,
            kwargs={"connect_timeout": int(self._connect_timeout_s)},
            name="tracescorer",
        )
        try:
            await self._pool.open(wait=True, timeout=self._connect_timeout_s)
        except Exception as exc:  # noqa: BLE001 - psycopg_pool raises its own PoolTimeout
            await self._pool.close()
            raise StoreError(f"cannot open a connection pool to {mask_dsn(self.dsn)}: {exc}") from None
        if self.instance_id and self.owner and self._register:
            old = await self._tx(claims.register_daemon, self.instance_id, self.owner, socket.gethostname())
            if old:
                log.info("released the claims of this daemon's previous process (%s)", old)

    async def stop(self, deadline: float | None = None) -> bool:
        """Close the pool (within 5 s at most: every write was awaited by its stage)."""
        self._closing = True
        timeout_s = 5.0 if deadline is None else min(5.0, seconds_left(deadline))
        if self._pool is not None:
            try:
                await asyncio.wait_for(self._pool.close(timeout=max(0.1, timeout_s)), timeout_s + 1)
            except TimeoutError:
                log.error("PostgreSQL pool did not close within %.1fs", timeout_s)
                return False
        return True

    @property
    def accepting(self) -> bool:
        return self._pool is not None and not self._closing

    @property
    def write_failure(self) -> str | None:
        return self._failure

    async def _tx(self, fn: Callable[..., Awaitable[T]], *args: Any, write: bool = True) -> T:
        """Run ``fn(conn, *args)`` in one transaction; retry transient failures."""
        import psycopg
        from psycopg import errors

        if self._pool is None or self._closing:
            raise StoreClosed("PostgreSQL store is closed" if self._closing else "PostgreSQL store is not open")
        delay = 0.05
        for attempt in range(_RETRIES + 1):
            try:
                async with self._pool.connection() as conn, conn.transaction():
                    value = await fn(conn, *args)
                self.stats["transactions"] += 1
                if write:
                    self._failure = None
                return value
            except (errors.SerializationFailure, errors.DeadlockDetected, psycopg.OperationalError) as exc:
                if attempt == _RETRIES or self._closing:
                    if write:
                        self._failure = f"PostgreSQL: {str(exc).strip()}"
                    raise StoreError(f"PostgreSQL: {str(exc).strip()}") from None
                self.stats["retries"] += 1
                log.debug("PostgreSQL transaction failed (%s); retrying", exc)
                await asyncio.sleep(delay)
                delay *= 4
            except (psycopg.DataError, psycopg.IntegrityError) as exc:
                raise DataError(f"PostgreSQL refused the data: {str(exc).strip()}") from None
            except psycopg.Error as exc:
                if write:
                    self._failure = f"PostgreSQL: {str(exc).strip()}"
                raise StoreError(f"PostgreSQL: {str(exc).strip()}") from None
            except Exception as exc:  # pool timeouts and the like: the store's error type
                if type(exc).__name__ in ("PoolTimeout", "PoolClosed"):
                    raise StoreError(f"PostgreSQL pool: {exc}") from None
                raise
        raise AssertionError("unreachable")
