"""The embedded store: one DuckDB file, owned by a store process beside the daemon.

:class:`DuckDBStore` is the store process's client (:class:`~.process.StoreProcess`) with one part
per consumer protocol of :mod:`tracescorer.store.api`, each part in the module that also holds
the SQL it sends: :class:`~.spanlog.SpanLogPart` (intake and span log), :class:`~.runs.RunsPart`,
:class:`~.scores.ScoresPart` (and :class:`~.judge_batches.JudgeBatchesPart`), :class:`~.deliveries.DeliveriesPart`, :class:`~.monitors.MonitorsPart`,
:class:`~.labels.LabelsPart` (human labels, other tools' evaluations) and
:class:`~.keys.RetentionPart` (results retention within the key-index budget),
:class:`~.reads.ReadsPart` (the product's own reads, on the store process's readers). Nothing is
coordinated between the store's clients (the daemon and its workers): each piece of shared state
has one owner in the daemon (conversations: :mod:`tracescorer.feed.partition`; the judge's rates:
:mod:`tracescorer.workers.share`).

In a worker process, ``DuckDBStore(path, attach_fd=fd)`` is the same client over a channel the
daemon attached to its store process (:meth:`~.process.StoreProcess.attach`): every part works
the same, the store process is the daemon's (see :mod:`~.process`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from tracescorer.runtime import default_owner
from tracescorer.sizes import size_bytes
from tracescorer.store.duckdb import keys
from tracescorer.store.duckdb.deliveries import DeliveriesPart
from tracescorer.store.duckdb.fresh import NewTraces
from tracescorer.store.duckdb.judge_batches import JudgeBatchesPart
from tracescorer.store.duckdb.keys import RetentionPart
from tracescorer.store.duckdb.labels import LabelsPart
from tracescorer.store.duckdb.monitors import MonitorsPart
from tracescorer.store.duckdb.process import CommitObserver, StoreProcess
from tracescorer.store.duckdb.reads import ReadsPart
from tracescorer.store.duckdb.runs import RunsPart
from tracescorer.store.duckdb.scores import ScoresPart
from tracescorer.store.duckdb.spanlog import SpanLogPart

log = logging.getLogger(__name__)


class DuckDBStore(
    SpanLogPart,
    RunsPart,
    ScoresPart,
    JudgeBatchesPart,
    DeliveriesPart,
    MonitorsPart,
    LabelsPart,
    RetentionPart,
    ReadsPart,
    StoreProcess,
):
    """A DuckDB database file served by a store process (see the module docstring)."""

    def __init__(
        self,
        path: str | Path,
        *,
        max_queue_items: int = 50_000,
        max_batch_items: int = 20_000,
        observer: CommitObserver | None = None,
        memory_limit: str = "1GB",
        checkpoint_threshold: str = "256MB",
        compression: str = "zstd",
        threads: int | None = 1,
        readers: int = 2,
        results_delay_s: float = 0.0,
        min_free_bytes: int = 32 << 20,
        index_memory_share: float = 0.4,
        prune_slice_keys: int = 20_000,
        query_max_concurrent: int = 2,
        query_memory_limit: str = "512MB",
        query_max_result_bytes: int = 64 << 20,
        query_grace_s: float = 2.0,
        duckdb_settings: Mapping[str, str] | None = None,
        attach_fd: int | None = None,
        owner: str = "",
        segment_log: str | None = None,
    ) -> None:
        StoreProcess.__init__(
            self,
            path,
            max_queue_items=max_queue_items,
            max_batch_items=max_batch_items,
            observer=observer,
            memory_limit=memory_limit,
            checkpoint_threshold=checkpoint_threshold,
            compression=compression,
            threads=threads,
            readers=readers,
            results_delay_s=results_delay_s,
            min_free_bytes=min_free_bytes,
            query_max_concurrent=query_max_concurrent,
            query_memory_limit=query_memory_limit,
            query_max_result_bytes=query_max_result_bytes,
            query_grace_s=query_grace_s,
            duckdb_settings=duckdb_settings,
            attach_fd=attach_fd,
            segment_log=segment_log,
        )
        #: keys the tables' indexes may hold (:mod:`tracescorer.store.duckdb.keys`)
        self.max_index_keys = keys.max_keys(size_bytes(memory_limit), index_memory_share)
        #: keys one transaction of a retention pass deletes at most (:func:`tracescorer.store.duckdb.keys.plan_prune`)
        self.prune_slice_keys = prune_slice_keys
        #: this client's id in export claims (default: unique to this process)
        self.owner = owner or default_owner()
        self._new_traces = NewTraces()
        self._settled = {}  # per export sink: where its due deliveries were settled (DeliveriesPart)
