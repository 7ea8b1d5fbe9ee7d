"""postgres mode: each daemon's span log in its own DuckDB file, the results shared in PostgreSQL.

:class:`CompositeStore` implements the whole :class:`~tracescorer.store.base.Store`: the
:class:`~tracescorer.store.base.SpanLog` methods go to the local
:class:`~tracescorer.store.duckdb.store.DuckDBStore` (telemetry acknowledged after its commit, as in
duckdb mode), the :class:`~tracescorer.store.base.ResultStore` methods and the coordination of
several daemons to the :class:`~tracescorer.store.postgres.store.PostgresResultStore`.

The daemon's *instance id* names its span log: made once, kept in the DuckDB file, it marks the
runs this daemon stored (restart recovery re-scores only its own runs) and finds the claims its
previous process left. The *owner* id names this process (a restarted daemon is a new owner).

Read-only queries are routed by the tables they name (:func:`tracescorer.store.postgres.query.route`,
run in the store process, which has DuckDB's parser): span-log tables to the DuckDB file, the
rest to PostgreSQL after the guard.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import secrets
from collections.abc import Collection, Sequence
from typing import Any

from tracescorer.config import mask_dsn
from tracescorer.model import AgentRun, Conversation, LogRecord, Span
from tracescorer.records.deliveries import Claim, DeliveryOutcome, DueScore
from tracescorer.records.monitors import MonitorEvent, MonitorState, Rebuilt, WindowSpec
from tracescorer.records.scores import AssemblyRecord, DecisionRecord, ScoreRecord
from tracescorer.store.base import (
    AppendOutcome,
    ConversationClaim,
    PendingRecovery,
    QueryResult,
    ReadOnlyViolation,
    ResultsPruned,
    StoreError,
    TraceData,
)
from tracescorer.store.duckdb import DuckDBStore, ops
from tracescorer.store.postgres import query as pg_query
from tracescorer.store.postgres.store import PostgresResultStore

log = logging.getLogger(__name__)

INSTANCE_KEY = "instance_id"


def classify(con: Any, sql: str) -> tuple[str, str | None]:
    """Store-process op: (``span_log`` | ``results``, None) or (``refused`` | ``error``, why)."""
    from tracescorer.store.duckdb import readonly

    try:
        where = pg_query.route(con, sql)
        if where == pg_query.RESULTS:
            pg_query.check(con, sql)
        return where, None
    except pg_query.Refused as exc:
        return "refused", str(exc)
    except readonly.QueryError as exc:
        return "error", str(exc)


class CompositeStore:
    """A local span log plus shared results (see the module docstring)."""

    def __init__(self, span_log: DuckDBStore, results: PostgresResultStore) -> None:
        self.span_log = span_log
        self.results = results
        self.max_queue_items = span_log.max_queue_items

    # --- lifecycle -------------------------------------------------------------------------------

    async def open(self) -> None:
        await self.span_log.open()
        try:
            instance = await self.span_log.read(ops.read_marker, INSTANCE_KEY)
            if not instance:
                instance = secrets.token_hex(8)
                await self.span_log.write(ops.write_marker, INSTANCE_KEY, instance)
            self.results.instance_id = instance
            await self.results.open()
        except BaseException:
            await self.span_log.close(5.0)
            raise
        log.info(
            "results in PostgreSQL (%s, schema %s); span log %s (instance %s)",
            mask_dsn(self.results.dsn),
            self.results.schema,
            self.span_log.path,
            instance,
        )

    async def close(self, timeout_s: float = 30.0) -> bool:
        results_ok = await self.results.close(min(5.0, timeout_s))
        return await self.span_log.close(timeout_s) and results_ok

    @property
    def instance_id(self) -> str:
        return self.results.instance_id

    @property
    def accepting(self) -> bool:
        return self.span_log.accepting and self.results.accepting

    @property
    def write_failure(self) -> str | None:
        return self.span_log.write_failure or self.results.write_failure

    @property
    def pending_items(self) -> int:
        return self.span_log.pending_items

    @property
    def process_pid(self) -> int | None:
        return self.span_log.process_pid

    # --- SpanLog: the local DuckDB file -----------------------------------------------------------

    async def append(self, spans: Sequence[Span], logs: Sequence[LogRecord] = ()) -> AppendOutcome:
        return await self.span_log.append(spans, logs)

    async def load_traces(
        self, trace_ids: Sequence[str], *, received: tuple[float, float] | None = None
    ) -> dict[str, TraceData]:
        return await self.span_log.load_traces(trace_ids, received=received)

    async def pending_traces(self, *, limit: int) -> list[tuple[str, float, float, bool]]:
        return await self.span_log.pending_traces(limit=limit)

    async def assembled_before(self, trace_ids: Sequence[str]) -> set[str]:
        return await self.span_log.assembled_before(trace_ids)

    async def set_assembled_through(self, when: dt.datetime) -> None:
        await self.span_log.set_assembled_through(when)

    async def record_assembly(self, records: Sequence[AssemblyRecord], *, new_traces: Collection[str] = ()) -> None:
        await self.span_log.record_assembly(records, new_traces=new_traces)

    async def prune_span_log(self, older_than: dt.datetime) -> dict[str, int]:
        return await self.span_log.prune_span_log(older_than)

    # --- ResultStore: PostgreSQL ------------------------------------------------------------------

    async def upsert_runs(
        self, runs: Sequence[AgentRun], *, replace_traces: Sequence[str] = (), new_traces: Collection[str] = ()
    ) -> None:
        await self.results.upsert_runs(runs, replace_traces=replace_traces, new_traces=new_traces)

    async def load_runs(self, run_ids: Sequence[str]) -> list[AgentRun]:
        return await self.results.load_runs(run_ids)

    async def load_conversation(self, conversation_id: str) -> Conversation | None:
        return await self.results.load_conversation(conversation_id)

    async def target_ids(self, scope: str, *, since: dt.datetime | None, until: dt.datetime | None) -> list[str]:
        return await self.results.target_ids(scope, since=since, until=until)

    async def write_scores(self, scores: Sequence[ScoreRecord], decisions: Sequence[DecisionRecord]) -> None:
        await self.results.write_scores(scores, decisions)

    async def spent_today_usd(self) -> float:
        return await self.results.spent_today_usd()

    async def prune_results(self, older_than: dt.datetime | None) -> ResultsPruned:
        shared = await self.results.prune_results(older_than)
        own = await self.span_log.prune_results(None)  # the span log's assembly records, within its index budget
        return dataclasses.replace(
            own, deleted={**own.deleted, **shared.deleted}, transactions=own.transactions + shared.transactions
        )

    async def unscored_recent(
        self, run_scorer_ids: Sequence[str], *, window_s: float, conversation_scorer_ids: Sequence[str] = ()
    ) -> PendingRecovery:
        return await self.results.unscored_recent(
            run_scorer_ids, window_s=window_s, conversation_scorer_ids=conversation_scorer_ids
        )

    async def due_deliveries(self, sink: str, owner: str, limit: int, ignore_backoff: bool = False) -> list[DueScore]:
        return await self.results.due_deliveries(sink, owner, limit, ignore_backoff)

    async def claim_deliveries(self, sink: str, owner: str, lease_s: float, claims: Sequence[Claim]) -> dict[str, int]:
        return await self.results.claim_deliveries(sink, owner, lease_s, claims)

    async def record_deliveries(
        self, sink: str, owner: str, outcomes: Sequence[DeliveryOutcome], all_sinks: Sequence[str]
    ) -> int:
        return await self.results.record_deliveries(sink, owner, outcomes, all_sinks)

    async def next_delivery_due_in(self, sink: str) -> float | None:
        return await self.results.next_delivery_due_in(sink)

    async def delivery_states(self, sink: str | None = None) -> list[dict[str, Any]]:
        return await self.results.delivery_states(sink)

    async def monitor_states(self, monitor_ids: Sequence[str]) -> list[MonitorState]:
        return await self.results.monitor_states(monitor_ids)

    async def save_monitors(self, states: Sequence[MonitorState], events: Sequence[MonitorEvent]) -> None:
        await self.results.save_monitors(states, events)

    async def prune_monitor_events(self, now: float) -> int:
        return await self.results.prune_monitor_events(now)

    async def rebuild_monitor_windows(self, specs: Sequence[WindowSpec], max_examples: int) -> Rebuilt:
        return await self.results.rebuild_monitor_windows(specs, max_examples)

    async def query(self, sql: str, *, max_rows: int, timeout_s: float, params: Sequence[Any] = ()) -> QueryResult:
        where, why = await self.span_log.read(classify, sql)
        if where == "refused":
            raise ReadOnlyViolation(why or "refused")
        if where == "error":
            raise StoreError(why or "invalid SQL")
        if where == pg_query.SPAN_LOG:
            return await self.span_log.query(sql, max_rows=max_rows, timeout_s=timeout_s, params=params)
        return await self.results.query(sql, max_rows=max_rows, timeout_s=timeout_s, params=params)

    # --- SharedCoordination: PostgreSQL -------------------------------------------------------------

    async def claim_conversations(
        self, *, idle_s: float, lease_s: float, limit: int, max_age_s: float
    ) -> list[ConversationClaim]:
        return await self.results.claim_conversations(idle_s=idle_s, lease_s=lease_s, limit=limit, max_age_s=max_age_s)

    async def renew_conversations(self, conversation_ids: Sequence[str], lease_s: float) -> list[str]:
        return await self.results.renew_conversations(conversation_ids, lease_s)

    async def finish_conversations(self, done: Sequence[tuple[str, int]], release: Sequence[str] = ()) -> int:
        return await self.results.finish_conversations(done, release)

    async def take_judge_tokens(self, bucket: str, tokens: float, capacity: float, per_s: float) -> float:
        return await self.results.take_judge_tokens(bucket, tokens, capacity, per_s)

    async def conversation_stats(self) -> dict[str, int]:
        return await self.results.conversation_stats()
