"""The store :class:`Settings` ask for: a DuckDB file, or a DuckDB span log with results in PostgreSQL."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracescorer.store.duckdb import CommitObserver, DuckDBStore

if TYPE_CHECKING:
    from tracescorer.config import Settings
    from tracescorer.store.composite import CompositeStore


def build_store(
    settings: Settings, *, observer: CommitObserver | None = None, owner: str = ""
) -> DuckDBStore | CompositeStore:
    """A new (unopened) store; ``owner`` names this process in claims (postgres mode)."""
    s = settings.store
    span_log = DuckDBStore(
        s.path,
        max_queue_items=settings.receiver.max_queue_items,
        max_batch_items=s.max_batch_items,
        observer=observer,
        memory_limit=s.memory_limit,
        checkpoint_threshold=s.checkpoint_threshold,
        compression=s.compression,
        threads=s.threads,
        results_delay_s=s.results_delay_s,
        index_memory_share=s.index_memory_share,
    )
    if s.backend == "duckdb":
        return span_log
    from tracescorer.store.composite import CompositeStore
    from tracescorer.store.postgres.store import PostgresResultStore

    pg = s.postgres
    results = PostgresResultStore(
        pg.dsn,
        schema=pg.schema_name,
        pool_min_size=pg.pool_min_size,
        pool_max_size=pg.pool_max_size,
        connect_timeout_s=pg.connect_timeout_s,
        query_role=pg.query_role or None,
        owner=owner,
    )
    return CompositeStore(span_log, results)
