"""The store process's disk reserve: no commit and no checkpoint while the disk of ``store.path``
(its databases and their WALs are in that folder) has less free than the reserve.

A write that fails for want of space is not the worst of a full disk: a checkpoint that fails
invalidates its database (DuckDB then refuses every statement until the file is opened again),
and DuckDB checkpoints each database it closes. So the writers look at the free space before each
group commit, the checkpointer before each checkpoint and the close before its own; below the
reserve they wait, looking again every :data:`POLL_S`, and go on by themselves once space is
back. A write waits :data:`WAIT_S` at most, then is refused as retryable
(:class:`~tracescorer.store.errors.StoreUnavailable`): its caller tries it again as after any
failed write (assembly tracks its traces again, the score writer keeps its rows, the feed holds
back), so no stage waits on a full disk past its own stop, and what the writes hold stays in the
segment log until it is stored.

The reserve is :func:`tracescorer.config.store.store_min_free_bytes`: half of
``segment_log.min_free_bytes``.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time

log = logging.getLogger("tracescorer.store.duckdb.engine")  # run as __main__ in the store process

#: how often the free space is looked at while writes wait for it
POLL_S = 0.5
#: how long a write waits for space before it is refused as retryable
WAIT_S = 2.0


class DiskReserve:
    """The free space the store keeps on the disk of ``path`` (``keep_bytes``; ``None`` path: an
    in-memory database, never short). Thread-safe: both writers and the checkpointer ask."""

    def __init__(self, path: str | None, keep_bytes: int) -> None:
        self.path = path
        self.keep_bytes = keep_bytes if path is not None else 0
        self._lock = threading.Lock()
        self._short_since: float | None = None  # monotonic; set from the first wait to the space back

    def free(self) -> int:
        """Free bytes on the disk of the database's folder."""
        if self.path is None:
            return 1 << 62
        return shutil.disk_usage(os.path.dirname(os.path.abspath(self.path))).free

    def short(self) -> bool:
        """Whether the disk has less free than the reserve now."""
        return self.keep_bytes > 0 and self.free() < self.keep_bytes

    def describe(self) -> str:
        """Why a write was not stored, for its caller."""
        return (
            f"the disk of {self.path} is nearly full ({self.free()} bytes free, the store keeps {self.keep_bytes}): "
            "not stored; retry once space is freed"
        )

    def wait(self, stopping: threading.Event, until: float) -> bool:
        """Whether the disk has the reserve free, waiting for it until ``until`` (monotonic
        seconds) unless ``stopping`` is set. The first wait of a streak is logged, and the space back."""
        while self.short():
            self._began()
            left = until - time.monotonic()
            if left <= 0 or stopping.wait(min(POLL_S, left)):
                return False
        self._went_on()
        return True

    def _began(self) -> None:
        with self._lock:
            if self._short_since is not None:
                return
            self._short_since = time.monotonic()
        log.warning(
            "the disk of %s has %d bytes free, under the %d the store keeps (half of segment_log.min_free_bytes): "
            "nothing is committed nor checkpointed until space is freed (writes are refused as retryable meanwhile)",
            self.path,
            self.free(),
            self.keep_bytes,
        )

    def _went_on(self) -> None:
        if self._short_since is None:
            return
        with self._lock:
            if self._short_since is None:
                return
            short_s, self._short_since = time.monotonic() - self._short_since, None
        log.info("writes go on: the disk of %s has %d bytes free again (after %.1f s)", self.path, self.free(), short_s)
