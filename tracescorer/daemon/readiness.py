"""Whether the daemon should get traffic now, and why not: what ``/readyz`` reports (its verdict
and detail), what ``tracescorer_ready`` and the gRPC health check follow, and the receivers' check
that refuses new requests while the segment log's feed is too far behind."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tracescorer.config.store import store_min_free_bytes
from tracescorer.receiver.ingest import Ingestor
from tracescorer.seglog import SegmentLog
from tracescorer.store.api import Health


class FeedStatus(Protocol):
    """How far the segment log's readers are: the daemon's own feed, or its worker processes."""

    @property
    def lag_bytes(self) -> int: ...
    @property
    def lag_s(self) -> float: ...
    @property
    def held_by(self) -> str | None: ...
    @property
    def failure(self) -> str | None: ...
    @property
    def offset(self) -> int: ...
    async def caught_up(self, timeout_s: float = 30.0) -> bool: ...


class WriteQueue(Protocol):
    """The store's write queue the feed appends to (:class:`~tracescorer.store.api.Intake`'s
    bound), or the fullest of the worker processes' queues."""

    @property
    def pending_items(self) -> int: ...
    @property
    def max_queue_items(self) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Readiness:
    """Reads the components whose bounds decide readiness; holds no state of its own."""

    health: Health
    intake: WriteQueue
    segment_log: SegmentLog
    feed: FeedStatus
    ingestor: Ingestor
    max_lag_bytes: int  # segment_log.max_lag_bytes
    #: the worker processes, each as /readyz tells of it (none: the daemon's own feed)
    workers: Callable[[], list[dict[str, Any]]] | None = None
    #: the DuckDB file (``store.path``; none: in memory), whose writes wait while its disk is short
    store_path: str | None = None

    def not_ready_reason(self) -> str | None:
        """Why the daemon should not get traffic now (None when ready): writes failing, or a
        pipeline stage over its bound."""
        failure = self.health.write_failure
        if failure is not None:
            return f"store writes are failing: {failure}"
        if self.feed.failure is not None:
            return f"the segment log's feed fails: {self.feed.failure}"
        free, keep = self.segment_log.disk_free(), self.segment_log.min_free_bytes
        store = self._store_disk_short()
        if free < keep:
            folder = self.segment_log.directory
            log = f"the disk is nearly full: {free} bytes free in {folder} (segment_log.min_free_bytes {keep})"
            return log if store is None else f"{log}; {store}"
        if store is not None:
            return store
        if self.intake.pending_items >= self.intake.max_queue_items:
            return "write queue full"
        return self.ingestor.over_bound() or self.ingestor.saturated()

    def _store_disk_short(self) -> str | None:
        """Why the store's writes wait (the disk of ``store.path`` is short of the store's reserve,
        :mod:`tracescorer.store.duckdb.space`), None while they need not."""
        if self.store_path is None:
            return None
        folder = os.path.dirname(os.path.abspath(self.store_path))
        free, keep = shutil.disk_usage(folder).free, store_min_free_bytes(self.segment_log.min_free_bytes)
        if free >= keep:
            return None
        return (
            f"the disk is nearly full: {free} bytes free in {folder}, the store's ({self.store_path}); its writes "
            f"wait until {keep} are (half of segment_log.min_free_bytes)"
        )

    def detail(self) -> dict[str, Any]:
        """What ``/readyz`` tells beside its verdict: how far the feed is behind the segment log
        (acknowledged requests not queryable yet) and which stage holds it back, if any; with
        worker processes, each of them; what damage the segment log's open found, if any."""
        detail: dict[str, Any] = {
            "feed_lag_bytes": self.feed.lag_bytes,
            "feed_lag_seconds": round(self.feed.lag_s, 3),
            "feed_held_by": self.feed.held_by,
        }
        if self.segment_log.damage:
            detail["segment_log_damage"] = [d.describe() for d in self.segment_log.damage]
        if self.workers is not None:
            detail["workers"] = self.workers()
        return detail

    def feed_backlog(self) -> str | None:
        """The receivers' backlog check ``log``: why new requests wait (the feed is
        ``segment_log.max_lag_bytes`` or more behind), None when they need not."""
        behind, bound = self.feed.lag_bytes, self.max_lag_bytes
        if behind < bound:
            return None
        return f"the segment log's feed is {behind} bytes behind (segment_log.max_lag_bytes {bound})"

    def while_serving(self, serving: Callable[[], bool]) -> Callable[[], str | None]:
        """:meth:`not_ready_reason`, and not ready while ``serving()`` is false (before the start
        finished, from the stop on): the gRPC health check's verdict."""

        def reason() -> str | None:
            return self.not_ready_reason() if serving() else "not started or shutting down"

        return reason
