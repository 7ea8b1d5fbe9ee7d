"""The store parts :class:`Settings` ask for: a DuckDB file, or a DuckDB span log with results in PostgreSQL.

:func:`build_stores` returns :class:`Stores`: one object per consumer protocol of
:mod:`tracescorer.store.api` (several may be the same engine) and the components to start, in
order. Nothing forwards calls: each stage is handed the engine that serves its part.
:func:`build_worker_stores` gives a worker process the same parts over a channel of the
daemon's store process, without retention (the daemon runs it).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tracescorer.config import mask_dsn
from tracescorer.config.store import store_min_free_bytes
from tracescorer.lifecycle import Component
from tracescorer.store.api import (
    Coordination,
    DeliveryStore,
    EvaluationStore,
    FeedState,
    Health,
    Intake,
    LabelStore,
    Leadership,
    MonitorStore,
    QueryStore,
    ReadStore,
    RunStore,
    ScoreStore,
    SpanLog,
)
from tracescorer.store.duckdb import layout
from tracescorer.store.duckdb.process import CommitObserver
from tracescorer.store.duckdb.store import DuckDBStore
from tracescorer.store.maintenance import Maintenance, MaintenanceObserver
from tracescorer.store.reads import StoreReads
from tracescorer.store.router import QueryRouter, Route, classify

if TYPE_CHECKING:
    from tracescorer.config import Settings


class StoreObserver(CommitObserver, MaintenanceObserver, Protocol):
    """What the store reports to (the daemon's metrics)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Stores:
    """The parts of the store a daemon hands its stages (see :mod:`tracescorer.store.api`)."""

    intake: Intake
    feed: FeedState
    span_log: SpanLog
    runs: RunStore
    scores: ScoreStore
    deliveries: DeliveryStore
    monitors: MonitorStore
    labels: LabelStore
    evaluations: EvaluationStore
    queries: QueryStore
    #: the product's own reads (read commands through the ops API, the agreement gauges, label targets)
    reads: ReadStore
    health: Health
    #: postgres mode: several daemons coordinate through the shared results
    coordination: Coordination | None
    #: postgres mode: one daemon of several runs a job (a lock per job name)
    leadership: Callable[[str], Leadership] | None
    #: started in this order, stopped in reverse
    components: tuple[Component, ...]
    #: for the start-up log line
    description: str
    #: this daemon's database files (databases and write-ahead logs), for the size gauge
    files: tuple[str, ...] = ()
    #: the daemon's: a new channel of its store process, for a worker process
    attach: Callable[[], socket.socket] | None = None
    #: a worker's: set when its channel of the daemon's store process is gone
    lost: asyncio.Event | None = None


class BothHealthy:
    """Health of a span log and results in different engines, or of a store and the worker
    processes writing to it: writes fail when any one's do."""

    def __init__(self, engines: Sequence[Health]) -> None:
        self._engines = list(engines)

    @property
    def accepting(self) -> bool:
        return all(e.accepting for e in self._engines)

    @property
    def write_failure(self) -> str | None:
        return next((f for e in self._engines if (f := e.write_failure) is not None), None)


def build_span_log(
    settings: Settings,
    observer: CommitObserver | None = None,
    *,
    attach_fd: int | None = None,
    owner: str = "",
) -> DuckDBStore:
    """The daemon's DuckDB file (the whole store in duckdb mode); with ``attach_fd``, a worker's
    client of the daemon's store process over that channel (:meth:`DuckDBStore.attach`); ``owner``
    names it in export claims."""
    s = settings.store
    return DuckDBStore(
        s.path,
        max_queue_items=settings.receiver.max_queue_items,
        max_batch_items=s.max_batch_items,
        observer=observer,
        memory_limit=s.memory_limit,
        checkpoint_threshold=s.checkpoint_threshold,
        compression=s.compression,
        threads=s.threads,
        results_delay_s=s.results_delay_s,
        min_free_bytes=store_min_free_bytes(settings.segment_log.min_free_bytes),
        index_memory_share=s.index_memory_share,
        query_max_concurrent=s.query_max_concurrent,
        query_memory_limit=s.query_memory_limit,
        query_max_result_bytes=s.query_max_result_bytes,
        attach_fd=attach_fd,
        owner=owner,
        # the segment log's folder (seglog.build_segment_log's rule): it must belong to this database
        segment_log=settings.segment_log.path or (s.path + ".log" if s.path != ":memory:" else None),
    )


def build_stores(
    settings: Settings,
    observer: StoreObserver,
    *,
    owner: str = "",
    maintenance: bool = True,
) -> Stores:
    """New (unstarted) store parts; ``owner`` names this process in claims (postgres mode);
    without ``maintenance`` (a one-off command) no retention passes run."""
    local = build_span_log(settings, observer, owner=owner)
    return _assemble(settings, observer, local, owner=owner, maintenance=maintenance, attach=local.attach)


def build_worker_stores(settings: Settings, observer: StoreObserver, *, attach_fd: int, owner: str) -> Stores:
    """A worker process's store parts (unstarted): every DuckDB part from a client over
    ``attach_fd``, a channel of the daemon's store process (:meth:`DuckDBStore.attach`); in postgres
    mode the results from a pool of the worker's own (claims under ``owner``). No retention
    passes: the daemon runs them. Coordination and leadership as :func:`build_stores` gives them
    (none in duckdb mode)."""
    local = build_span_log(settings, observer, attach_fd=attach_fd, owner=owner)
    return _assemble(settings, observer, local, owner=owner, maintenance=False, lost=local.lost, register=False)


def _assemble(
    settings: Settings,
    observer: StoreObserver,
    local: DuckDBStore,
    *,
    owner: str,
    maintenance: bool,
    attach: Callable[[], socket.socket] | None = None,
    lost: asyncio.Event | None = None,
    register: bool = True,
) -> Stores:
    s = settings.store
    if s.backend == "duckdb":
        return Stores(
            intake=local,
            feed=local,
            span_log=local,
            runs=local,
            scores=local,
            deliveries=local,
            monitors=local,
            labels=local,
            evaluations=local,
            queries=local,
            reads=StoreReads(span_log=local, results=local),
            health=local,
            coordination=None,  # each piece of shared state has one owner in the daemon
            leadership=None,
            components=(local, Maintenance(s, local, [local], observer)) if maintenance else (local,),
            attach=attach,
            lost=lost,
            description=f"store {s.path}",
            files=tuple(layout.files(s.path)),
        )
    from tracescorer.store.postgres.leader import AdvisoryLeader
    from tracescorer.store.postgres.store import PostgresResultStore

    pg = s.postgres
    shared = PostgresResultStore(
        pg.dsn,
        schema=pg.schema_name,
        pool_min_size=pg.pool_min_size,
        pool_max_size=pg.pool_max_size,
        connect_timeout_s=pg.connect_timeout_s,
        query_role=pg.query_role or None,
        identity=local.instance_id,
        owner=owner,
        register=register,  # the daemon registers; its workers claim under owners derived from its own
    )

    async def route(sql: str) -> Route:
        return await local.read(classify, sql)  # DuckDB's parser lives in the store process

    def leader(name: str) -> Leadership:
        return AdvisoryLeader(pg.dsn, name, connect_timeout_s=pg.connect_timeout_s)

    return Stores(
        intake=local,
        feed=local,
        span_log=local,
        runs=shared,
        scores=shared,
        deliveries=shared,
        monitors=shared,
        labels=shared,
        evaluations=shared,
        queries=QueryRouter(route, span_log=local, results=shared),
        reads=StoreReads(span_log=local, results=shared),
        health=BothHealthy([local, shared]),
        coordination=shared,
        leadership=leader,
        # the span log first: it keeps the instance id the results store registers under
        components=(local, shared, Maintenance(s, local, [shared], observer, budget_only=[local]))
        if maintenance
        else (local, shared),
        description=f"span log {s.path}, results in PostgreSQL {mask_dsn(pg.dsn)} (schema {pg.schema_name})",
        files=tuple(layout.files(s.path)),
        attach=attach,
        lost=lost,
    )


def build_offline_queries(settings: Settings) -> QueryStore:
    """The query path of a read command when no daemon serves the store: the DuckDB file opened
    read-only per query in a query process under the query memory limit, and in postgres mode
    PostgreSQL directly, routed as the daemon routes."""
    from tracescorer.store.duckdb.readfile import ReadOnlyFile

    s = settings.store
    file = ReadOnlyFile(s.path, memory_limit=s.query_memory_limit, max_result_bytes=s.query_max_result_bytes)
    if settings.store.backend == "duckdb":
        return file
    from tracescorer.store.postgres.query import DirectQueries

    pg = settings.store.postgres
    results = DirectQueries(
        pg.dsn, schema=pg.schema_name, role=pg.query_role or None, connect_timeout_s=pg.connect_timeout_s
    )

    async def route(sql: str) -> Route:
        return await asyncio.to_thread(_classify_here, sql)

    return QueryRouter(route, span_log=file, results=results)


def build_offline_reads(settings: Settings) -> ReadStore:
    """The product's reads of a read command when no daemon serves the store: the DuckDB file
    opened read-only for each read, and in postgres mode PostgreSQL directly."""
    from tracescorer.store.duckdb.reads import FileRows

    s = settings.store
    file = FileRows(s.path, memory_limit=s.query_memory_limit)
    if s.backend == "duckdb":
        return StoreReads(span_log=file, results=file)
    from tracescorer.store.postgres.reads import DirectRows

    pg = s.postgres
    results = DirectRows(pg.dsn, schema=pg.schema_name, connect_timeout_s=pg.connect_timeout_s)
    return StoreReads(span_log=file, results=results)


def _classify_here(sql: str) -> Route:
    import duckdb

    parser = duckdb.connect()  # DuckDB's parser for the statement guard; no database
    try:
        return classify(parser, sql)
    finally:
        parser.close()
