"""What the daemon and its store process agree on: request kinds, options, errors, the entry point.

Kept free of heavy imports: the daemon imports this, only the store process imports DuckDB and
Arrow (:mod:`tracescorer.store.duckdb.engine`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# request kinds
TELEMETRY, WRITE, READ, QUERY, CLOSE = "t", "w", "r", "q", "c"

#: the store process's exit status once DuckDB invalidated its database (the daemon starts a new one)
EXIT_INVALIDATED = 75


@dataclass(frozen=True, slots=True)
class EngineOptions:
    path: str
    memory_limit: str = "1GB"
    checkpoint_threshold: str = "256MB"
    max_batch_items: int = 20_000
    readers: int = 2
    duckdb_threads: int | None = None
    compression: str = "zstd"
    results_delay_s: float = 0.0
    #: free disk kept on the disk of ``path``: commits and checkpoints wait below it (:mod:`.space`)
    min_free_bytes: int = 32 << 20
    #: the query box (:mod:`tracescorer.store.duckdb.querybox`): queries at once, and what each may take
    query_max_concurrent: int = 2
    query_memory_limit: str = "512MB"
    query_max_result_bytes: int = 64 << 20
    #: after a query's own timeout (its process interrupts it), how long before its process is killed
    query_grace_s: float = 2.0
    #: the daemon's segment log folder: checked to belong to this database at open, and stamped (:mod:`.layout`)
    segment_log: str | None = None
    #: further DuckDB settings at open, before the configuration is locked (fault drills)
    settings: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Failure:
    """An error sent back to the daemon (rebuilt there as the named StoreError subclass)."""

    kind: str  # StoreError | DataError | ReadOnlyViolation | StoreClosed | StoreUnavailable | DiskFull
    message: str
