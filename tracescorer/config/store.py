"""``store`` (DuckDB file, retention, memory, queries) and ``store.postgres`` settings, the
start-up check that ``store.path`` can hold a database, and the free disk the store keeps."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from tracescorer.config.base import Section
from tracescorer.config.errors import ConfigError
from tracescorer.sizes import size_bytes

#: the smallest ``store.memory_limit`` the store writes within
MIN_MEMORY_BYTES = 128 * 1000**2


class PostgresSettings(Section):
    """``store.postgres``: the shared result store when ``store.backend`` is ``postgres``."""

    dsn: str = Field("", description="libpq connection string or URL, e.g. postgresql://ts:${PGPASSWORD}@db/ts")
    schema_name: str = Field("tracescorer", min_length=1, description="schema holding the tables (created if missing)")
    pool_min_size: int = Field(1, ge=0)
    pool_max_size: int = Field(
        8, gt=0, description="connections per process: the daemon and each of its worker processes have a pool"
    )
    connect_timeout_s: float = Field(10, gt=0)
    query_role: str = Field("tracescorer_query", description="SELECT-only role read-only queries run as; empty = none")
    claim_lease_s: float = Field(60, gt=0, description="a conversation claim's lease; renewed while it is scored")
    claim_interval_s: float = Field(1.0, gt=0, description="how often a daemon looks for idle conversations")

    @model_validator(mode="after")
    def _pool(self) -> PostgresSettings:
        if self.pool_min_size > self.pool_max_size:
            raise ValueError("pool_min_size must not exceed pool_max_size")
        return self


class StoreSettings(Section):
    backend: Literal["duckdb", "postgres"] = Field(
        "duckdb",
        description="duckdb: everything in the file at path; postgres: the span log there, results shared "
        "in PostgreSQL (several daemons)",
    )
    postgres: PostgresSettings = PostgresSettings()
    path: str = "tracescorer.duckdb"
    spans: Literal["agent", "all", "none"] = Field(
        "none",
        description="span rows for SQL over spans, a copy derived from the segment log (assembly and scoring "
        "never read them). none: no span rows (runs, scores, assembled and skipped traces are stored). agent: "
        "the spans and log records that may be part of a run (triage); all: every span and log record. A "
        "feed of their own writes them at lower priority than scoring: each costs a second decode of what it "
        "keeps and its rows' writes (about half the daemon's CPU per span at 'all'); if it falls "
        "segment_log.max_lag_bytes behind, the rows of what it missed are skipped (counted)",
    )
    retention_days: float = Field(30, gt=0, description="span-log rows received longer ago than this are deleted")
    retention_interval_s: float = Field(3600, gt=0)
    results_retention_days: float | None = Field(
        None,
        gt=0,
        description="runs, scores, decisions (and their export deliveries) last written longer ago than "
        "this are deleted at each retention pass; unset: kept, within the index budget",
    )
    index_memory_share: float = Field(
        0.4,
        gt=0,
        le=0.8,
        description="DuckDB holds the key indexes of the results tables in memory, inside "
        "memory_limit (~80 bytes a key, ~7 keys a trace with two scorers): past this "
        "share of memory_limit the oldest results are deleted (and logged)",
    )
    index_check_interval_s: float = Field(15, gt=0, description="how often the index budget is checked")
    monitor_rebuild_s: float = Field(
        5,
        gt=0,
        description="when other processes store scores too (several daemons on PostgreSQL, or worker "
        "processes), how often the monitors recount their windows from the stored scores",
    )
    max_batch_items: int = Field(20_000, gt=0, description="rows per group commit")
    memory_limit: str = Field("1GB", pattern=r"^\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")
    checkpoint_threshold: str = Field(
        "256MB",
        pattern=r"^\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$",
        description="WAL size at which a database of the store is checkpointed (checkpoints run beside the "
        "writers; fewer, larger ones cost a quarter of the CPU of 64MB ones on span-log data)",
    )
    compression: Literal["zstd", "auto"] = Field(
        "zstd",
        description="how checkpoints compress the tables: zstd (half the CPU and a third less disk than "
        "DuckDB's per-column choice on span-log text), or auto",
    )
    threads: int = Field(
        1,
        ge=1,
        le=64,
        description="DuckDB worker threads in the store process: with 1 the store's writes "
        "cost ~15% less CPU than with one per core (measured on 2 cores); more "
        "speed up large queries",
    )
    results_delay_s: float = Field(
        0.15,
        ge=0,
        le=5,
        description="results writes (runs, scores, decisions) wait up to this long to be committed "
        "together: fewer, larger commits (a commit has a fixed cost of several ms); "
        "acknowledgements of telemetry never wait for it",
    )
    query_max_rows: int = Field(10_000, gt=0)
    query_timeout_s: float = Field(30.0, gt=0)
    query_max_concurrent: int = Field(
        2,
        ge=1,
        le=64,
        description="ops-API queries (the read commands') run at once, each in a query process of its own; "
        "more are refused with 429 and Retry-After (the CLI waits and retries)",
    )
    query_memory_limit: str = Field(
        "512MB",
        pattern=r"^\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$",
        description="what one query may hold: DuckDB's memory_limit in its query process, whose address space "
        "is capped at this above what it needs to start; a query past it fails, nothing else is touched",
    )
    query_max_result_bytes: int = Field(
        64 * 1024 * 1024, gt=0, description="a query's result (its rows, serialized) larger than this is refused"
    )

    @field_validator("memory_limit")
    @classmethod
    def _room_for_the_indexes(cls, value: str) -> str:
        # measured at 2k spans/s: with 64MB every few seconds a commit failed "out of memory" (the key
        # indexes take index_memory_share of it, the commits and the checkpoints need the rest)
        if size_bytes(value) < MIN_MEMORY_BYTES:
            raise ValueError(
                f"store.memory_limit {value} is below 128MB: DuckDB holds the results' key indexes and "
                "each commit inside it, and writes fail with less"
            )
        return value

    @field_validator("query_memory_limit")
    @classmethod
    def _room_for_a_query(cls, value: str) -> str:
        if size_bytes(value) < 64 * 1024 * 1024:
            raise ValueError(f"store.query_memory_limit {value} is below 64MB: a query process needs that to start")
        return value

    @model_validator(mode="after")
    def _dsn_for_postgres(self) -> StoreSettings:
        if self.backend == "postgres" and not self.postgres.dsn.strip():
            raise ValueError("store.backend is postgres: set store.postgres.dsn (e.g. ${TRACESCORER_PG_DSN})")
        return self


def store_min_free_bytes(segment_log_min_free_bytes: int) -> int:
    """The free disk the store keeps on the disk of ``store.path`` (its writes and checkpoints wait
    below it): half of ``segment_log.min_free_bytes``. Where the two share a disk (the default), new
    requests are refused first and the store can still store what the log already acknowledged,
    which lets the feed pass segments the log then releases; the store stops before the disk is full."""
    return segment_log_min_free_bytes // 2


def check_store_path(path: str) -> Path | None:
    """Check that ``store.path`` can hold a database. Returns the directory that does not exist
    yet (``serve`` creates it and says so), else None. Raises :class:`ConfigError`."""
    if path == ":memory:":
        return None
    target = Path(path).absolute()
    if target.is_dir():
        raise ConfigError(
            f"store.path: {path!r} is a directory; give a file name, e.g. {str(Path(path) / 'tracescorer.duckdb')!r}"
        )
    existing = next(p for p in target.parents if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"store.path: {path!r} is below {str(existing)!r}, which is a file, not a directory")
    missing = existing != target.parent
    if (missing or not target.exists()) and not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"store.path: {path!r}: directory {str(existing)!r} is not writable")
    return target.parent if missing else None
