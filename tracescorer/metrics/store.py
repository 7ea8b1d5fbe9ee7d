"""The families of the store (group commits, checkpoints, retention, the writer's queue, key
indexes, file size, its disk's free space) and ``tracescorer_ready``; the store reports to them as
its commit and maintenance observer."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from tracescorer.metrics.families import Families


class StoreFamilies(Families):
    """The store's metrics and the daemon's readiness gauge; the store's observer."""

    commit_seconds: Histogram
    checkpoint_seconds: Histogram
    commits: Counter
    write_errors: Counter
    retention_deleted: Counter
    queue_items: Gauge
    index_keys: Gauge
    index_bytes: Gauge
    ready: Gauge
    db_size: Gauge
    disk_free: Gauge

    def _declare_store(self, r: CollectorRegistry) -> None:
        self.commit_seconds = Histogram(
            "tracescorer_store_commit_seconds",
            "Duration of one group commit",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=r,
        )
        self.checkpoint_seconds = Histogram(
            "tracescorer_store_checkpoint_seconds",
            "Duration of one checkpoint of a store database (its commits wait meanwhile)",
            ["database"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16),
            registry=r,
        )
        self.commits = Counter("tracescorer_store_commits", "Group commits", registry=r)
        self.write_errors = Counter("tracescorer_store_write_errors", "Failed write transactions", registry=r)
        self.retention_deleted = Counter(
            "tracescorer_store_retention_deleted_rows",
            "Rows deleted by retention",
            ["table"],
            registry=r,
        )
        self.queue_items = Gauge("tracescorer_store_queue_items", "Items waiting for the writer", registry=r)
        self.index_keys = Gauge(
            "tracescorer_store_index_keys",
            "Keys in the DuckDB store's key indexes at the last budget check (kept within "
            "store.index_memory_share of store.memory_limit, ~80 bytes a key)",
            registry=r,
        )
        self.index_bytes = Gauge(
            "tracescorer_store_index_memory_bytes",
            "Memory DuckDB held for key indexes at the last budget check",
            registry=r,
        )
        self.ready = Gauge(
            "tracescorer_ready",
            "1 while the daemon takes traffic; 0 while writes fail or a pipeline stage is over its "
            "bound (see tracescorer_receiver_backpressure and /readyz for the reason)",
            registry=r,
        )
        self.db_size = Gauge(
            "tracescorer_store_db_size_bytes", "Size of the store's files (both databases and their WALs)", registry=r
        )
        self.disk_free = Gauge(
            "tracescorer_store_disk_free_bytes",
            "Free bytes on the disk of store.path: below half of segment_log.min_free_bytes the store's "
            "writes and checkpoints wait (and /readyz says so)",
            registry=r,
        )

    def track_readiness(self, reason: Callable[[], str | None]) -> None:
        """``tracescorer_ready`` is 1 while ``reason()`` is None; the info metric names the reason."""
        self.ready.set_function(lambda: 0.0 if reason() else 1.0)

    def track_queue(self, depth: Callable[[], int]) -> None:
        self.queue_items.set_function(depth)

    def track_db_size(self, files: Sequence[str]) -> None:
        """The store's size: the sum of ``files`` (those missing count 0); the free space of their disk."""

        def size() -> float:
            total = 0
            for name in files:
                try:
                    total += os.stat(name).st_size
                except OSError:
                    pass
            return float(total)

        self.db_size.set_function(size)
        # the databases and their WALs share a folder (the first file is the main database)
        folder = os.path.dirname(os.path.abspath(files[0])) if files else None
        if folder is not None:
            self.disk_free.set_function(lambda: float(shutil.disk_usage(folder).free))

    # CommitObserver
    def on_commit(self, seconds: float, spans: int, logs: int) -> None:
        self.commit_seconds.observe(seconds)
        self.commits.inc()

    def on_checkpoint(self, database: str, seconds: float) -> None:
        self.child(self.checkpoint_seconds, database).observe(seconds)

    def on_error(self, error: BaseException) -> None:
        self.write_errors.inc()

    # MaintenanceObserver (the store's retention and index budget passes)
    def on_retention(self, table: str, rows: int) -> None:
        self.retention_deleted.labels(table).inc(rows)

    def on_index_budget(self, keys: int | None, index_bytes: int | None) -> None:
        if keys is not None:
            self.index_keys.set(keys)
        if index_bytes is not None:
            self.index_bytes.set(index_bytes)
