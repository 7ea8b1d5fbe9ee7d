"""The PostgreSQL result store: runs, conversations, scores, decisions, deliveries, budget, monitors.

:class:`PostgresResultStore` implements :class:`~tracescorer.store.api.ResultStore` on an async
psycopg 3 connection pool, plus the coordination several daemons need
(:class:`~tracescorer.store.api.SharedCoordination`: conversation claims, the shared judge
token bucket, daemon registration). Every method runs one transaction on a pooled connection:
nothing blocks the event loop. A transaction that hits a serialization failure, a deadlock or a
dropped connection is retried a few times before the error becomes a :class:`StoreError`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import socket
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, TypeVar

from tracescorer.config import mask_dsn
from tracescorer.lifecycle import seconds_left
from tracescorer.model import AgentRun, Conversation
from tracescorer.records.deliveries import Claim, DeliveryOutcome, DueScore
from tracescorer.records.monitors import MonitorEvent, MonitorState, Rebuilt, WindowSpec
from tracescorer.records.scores import DecisionRecord, ScoreRecord
from tracescorer.store.api import (
    ConversationClaim,
    DataError,
    PendingRecovery,
    QueryResult,
    ReadOnlyViolation,
    ResultsPruned,
    SchemaError,
    StoreClosed,
    StoreError,
)
from tracescorer.store.postgres import claims, deliveries, migrations, monitors, query, results
from tracescorer.store.runs import run_from_row, run_to_row
from tracescorer.store.scores import decision_values, score_values

log = logging.getLogger(__name__)
T = TypeVar("T")

_RETRIES = 3


def _configure_types(conn: Any) -> None:
    """JSON columns come back as their text (as from DuckDB): run rows decode them themselves."""
    from psycopg.types.string import TextLoader

    conn.adapters.register_loader("json", TextLoader)
    conn.adapters.register_loader("jsonb", TextLoader)


class PostgresResultStore:
    """Results in PostgreSQL (see the module docstring)."""

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
    ) -> None:
        self.dsn = dsn
        self.schema = schema
        #: names this daemon's span log: marks the runs it stored, finds the claims its previous process left
        self.instance_id = instance_id
        self._identity = identity  # where the instance id is kept (the span log's file), read at start
        self.owner = owner
        self._min, self._max = pool_min_size, pool_max_size
        self._connect_timeout_s = connect_timeout_s
        self._query_role_name = query_role
        self._query_role: str | None = None
        self._pool: Any = None
        self._closing = False
        self._failure: str | None = None
        self.stats = {"transactions": 0, "rows": 0, "retries": 0}

    # --- lifecycle -------------------------------------------------------------------------------

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
        if self.instance_id and self.owner:
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

    # --- ResultStore -----------------------------------------------------------------------------

    async def upsert_runs(
        self, runs: Sequence[AgentRun], *, replace_traces: Sequence[str] = (), new_traces: Collection[str] = ()
    ) -> None:  # INSERT ... ON CONFLICT needs no hint
        if not runs and not replace_traces:
            return
        rows = [run_to_row(r) for r in runs]
        self.stats["rows"] += await self._tx(results.upsert_runs, rows, list(replace_traces), self.instance_id)

    async def load_runs(self, run_ids: Sequence[str]) -> list[AgentRun]:
        return [run_from_row(r) for r in await self._tx(results.load_runs, list(run_ids), write=False)]

    async def load_conversation(self, conversation_id: str) -> Conversation | None:
        runs = tuple(run_from_row(r) for r in await self._tx(results.load_conversation, conversation_id, write=False))
        return Conversation(conversation_id=conversation_id, runs=runs) if runs else None

    async def target_ids(self, scope: str, *, since: dt.datetime | None, until: dt.datetime | None) -> list[str]:
        return await self._tx(results.target_ids, scope, since, until, write=False)

    async def write_scores(self, scores: Sequence[ScoreRecord], decisions: Sequence[DecisionRecord]) -> None:
        if not scores and not decisions:
            return
        await self._tx(results.write_scores, [score_values(s) for s in scores], [decision_values(d) for d in decisions])
        self.stats["rows"] += len(scores) + len(decisions)

    async def spent_today_usd(self) -> float:
        return await self._tx(results.spent_today, write=False)

    async def prune_results(self, older_than: dt.datetime | None) -> ResultsPruned:
        # indexes in PostgreSQL are on disk: only the age deletes
        if older_than is None:
            return ResultsPruned()
        return ResultsPruned(deleted=await self._tx(results.prune_results, older_than), transactions=1)

    async def unscored_recent(
        self, run_scorer_ids: Sequence[str], *, window_s: float, conversation_scorer_ids: Sequence[str] = ()
    ) -> PendingRecovery:
        found, _ = await self._tx(
            results.unscored_recent, list(run_scorer_ids), window_s, self.instance_id, write=False
        )
        return PendingRecovery(
            runs=[run_from_row(r) for r, _ in found],
            conversation_ids=[],
            decided={("run", r[0]): frozenset(d) for r, d in found},
        )

    # --- export deliveries ------------------------------------------------------------------------

    async def due_deliveries(self, sink: str, owner: str, limit: int, ignore_backoff: bool = False) -> list[DueScore]:
        return await self._tx(deliveries.read_due, sink, owner, limit, ignore_backoff, write=False)

    async def claim_deliveries(self, sink: str, owner: str, lease_s: float, claims_: Sequence[Claim]) -> dict[str, int]:
        return await self._tx(deliveries.claim, sink, owner, lease_s, list(claims_))

    async def record_deliveries(
        self, sink: str, owner: str, outcomes: Sequence[DeliveryOutcome], all_sinks: Sequence[str]
    ) -> int:
        return await self._tx(deliveries.record, sink, owner, list(outcomes), list(all_sinks))

    async def next_delivery_due_in(self, sink: str) -> float | None:
        return await self._tx(deliveries.next_due_in, sink, write=False)

    async def delivery_states(self, sink: str | None = None) -> list[dict[str, Any]]:
        return await self._tx(deliveries.states, sink, write=False)

    # --- monitors ---------------------------------------------------------------------------------

    async def monitor_states(self, monitor_ids: Sequence[str]) -> list[MonitorState]:
        return await self._tx(monitors.load_states, list(monitor_ids), write=False)

    async def save_monitors(self, states: Sequence[MonitorState], events: Sequence[MonitorEvent]) -> None:
        await self._tx(monitors.save, list(states), list(events))

    async def prune_monitor_events(self, now: float) -> int:
        return await self._tx(monitors.prune_events, now)

    async def rebuild_monitor_windows(self, specs: Sequence[WindowSpec], max_examples: int) -> Rebuilt:
        return await self._tx(monitors.rebuild, list(specs), max_examples, write=False)

    # --- the read-only query path -----------------------------------------------------------------

    async def query(self, sql: str, *, max_rows: int, timeout_s: float, params: Sequence[Any] = ()) -> QueryResult:
        """Run an already checked statement (:func:`tracescorer.store.postgres.query.check`) read-only."""
        import psycopg

        if self._pool is None or self._closing:
            raise StoreClosed("PostgreSQL store is not open")
        try:
            async with self._pool.connection() as conn:
                return await query.run_async(
                    conn,
                    sql,
                    max_rows=max_rows,
                    timeout_s=timeout_s,
                    schema=self.schema,
                    role=self._query_role,
                    params=params,
                )
        except psycopg.errors.QueryCanceled:
            raise StoreError(f"query timed out after {timeout_s:g}s") from None
        except psycopg.errors.InsufficientPrivilege as exc:
            raise ReadOnlyViolation(f"refused by PostgreSQL: {str(exc).strip()}") from None
        except psycopg.errors.ReadOnlySqlTransaction as exc:
            raise ReadOnlyViolation(f"refused by PostgreSQL: {str(exc).strip()}") from None
        except psycopg.Error as exc:
            raise StoreError(f"query failed: {str(exc).strip()}") from None

    # --- coordination of several daemons ----------------------------------------------------------

    async def claim_conversations(
        self, *, idle_s: float, lease_s: float, limit: int, max_age_s: float
    ) -> list[ConversationClaim]:
        return await self._tx(claims.claim_due, self.owner, idle_s, lease_s, limit, max_age_s)

    async def renew_conversations(self, conversation_ids: Sequence[str], lease_s: float) -> list[str]:
        return await self._tx(claims.renew, self.owner, list(conversation_ids), lease_s)

    async def finish_conversations(self, done: Sequence[tuple[str, int]], release: Sequence[str] = ()) -> int:
        return await self._tx(claims.finish, self.owner, list(done), list(release))

    async def take_judge_tokens(self, bucket: str, tokens: float, capacity: float, per_s: float) -> float:
        return await self._tx(claims.take_tokens, bucket, tokens, capacity, per_s)

    async def conversation_stats(self) -> dict[str, int]:
        return await self._tx(claims.conversation_stats, write=False)
