"""The store process's checkpoints: each database once its WAL passes the threshold, outside the commits.

DuckDB's own checkpoint runs inside a commit and holds every write of its database for its
length; here a thread checkpoints on a cursor of its own, and a span log only after telemetry has
moved to the other one (see :mod:`tracescorer.store.duckdb.layout`), so no acknowledgement waits
for a checkpoint. No checkpoint starts while the disk is short of the store's reserve
(:mod:`tracescorer.store.duckdb.space`): one that failed for space would invalidate its database.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, NoReturn

import duckdb

from tracescorer.sizes import size_bytes
from tracescorer.store.duckdb import layout
from tracescorer.store.duckdb.space import DiskReserve

log = logging.getLogger("tracescorer.store.duckdb.engine")

#: how often each WAL's size is compared with the threshold
CHECK_EVERY_S = 0.5
#: a checkpoint this long is logged: the commits of its database (acknowledgements, for a span log) waited for it
SLOW_CHECKPOINT_S = 2.0


class Checkpoints:
    """A mixin of :class:`~tracescorer.store.duckdb.engine.Engine`."""

    options: Any
    _catalog: str
    _stopping: threading.Event  # set when the engine shuts down
    _logs: threading.Condition
    _log_target: str
    _log_in_use: str | None
    _checkpoints: list[tuple[str, float]]
    _checkpoints_lock: threading.Lock
    _reserve: DiskReserve

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        raise NotImplementedError

    def _invalidated(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def _exit_invalidated(self, cause: BaseException) -> NoReturn:
        raise NotImplementedError

    def _checkpointer(self) -> None:
        """Checkpoint each database once its WAL passes the threshold, on a cursor of its own and
        outside the writers' commits (DuckDB's own checkpoint runs inside a commit). A checkpoint
        holds the commits of its database for its length: a span log is checkpointed only after
        telemetry has moved to the other one (see :mod:`tracescorer.store.duckdb.layout`)."""
        threshold = size_bytes(self.options.checkpoint_threshold)
        cur = self._cursor()  # the telemetry writer uses the connection itself
        try:
            catalogs = [*layout.SPAN_LOGS, self._catalog]
            wals = [(catalog, wal) for catalog in catalogs if (wal := layout.wal_of(cur, catalog))]
        finally:
            cur.close()
        # a shutdown ends the wait between looks at once: it joins this thread
        while not self._stopping.wait(CHECK_EVERY_S):
            for catalog, wal in wals:
                try:
                    if os.path.getsize(wal) < threshold:
                        continue
                except OSError:
                    continue
                if self._reserve.short():  # none below the reserve: looked at again next time
                    break
                if catalog in layout.SPAN_LOGS and not self._move_appends_off(catalog):
                    continue
                self._checkpoint(catalog)

    def _move_appends_off(self, catalog: str, timeout_s: float = 5.0) -> bool:
        """Send telemetry to the other span log; True once no telemetry transaction is open on ``catalog``."""
        with self._logs:
            if self._log_target == catalog:
                self._log_target = next(c for c in layout.SPAN_LOGS if c != catalog)
            return self._logs.wait_for(lambda: self._log_in_use != catalog, timeout_s)

    def _claim_log(self) -> str:
        with self._logs:
            self._log_in_use = self._log_target
            return self._log_target

    def _release_log(self) -> None:
        with self._logs:
            self._log_in_use = None
            self._logs.notify_all()

    def _checkpoint(self, catalog: str) -> None:
        started = time.perf_counter()
        try:
            cur = self._cursor()
            try:
                cur.execute(f"CHECKPOINT {layout.quote(catalog)}")
            finally:
                cur.close()
        except duckdb.Error as exc:  # a conflicting transaction: try again later
            if self._invalidated(exc):  # a full disk, say: the database is unusable until opened again
                self._exit_invalidated(exc)
            log.debug("checkpoint of %s skipped: %s", catalog, exc)
            return
        seconds = time.perf_counter() - started
        database = "span_log" if catalog in layout.SPAN_LOGS else "main"
        if seconds >= SLOW_CHECKPOINT_S:  # its database's commits waited meanwhile
            log.warning("checkpoint of the %s database (%s) took %.1f s", database, catalog, seconds)
        with self._checkpoints_lock:
            self._checkpoints.append((database, seconds))
