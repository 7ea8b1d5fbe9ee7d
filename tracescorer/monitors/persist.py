"""Storing the monitors' states and events: state changes at once, value-only moves at most every
``interval_s``, in the background on the event loop; a failed write is retried with the next one.

One write at a time: what changes while a write is under way goes in the next one, started when
it ends. Two writes in flight could commit out of order on a pool of connections (PostgreSQL),
leaving an older state stored last, which the next leader (or start) would act on.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable

from tracescorer.records.monitors import MonitorEvent, MonitorState
from tracescorer.store.api import MonitorStore

log = logging.getLogger(__name__)

MAX_UNSTORED_EVENTS = 1000  # kept for the next write while the store refuses them; the oldest go first


class StateWriter:
    """Collects what to store (by monitor index) and writes it through the :class:`MonitorStore`."""

    def __init__(self, store: MonitorStore, state_of: Callable[[int], MonitorState], *, interval_s: float) -> None:
        self._store = store
        self._state_of = state_of
        self._interval_s = interval_s
        self._changed: set[int] = set()  # to store with the next write (transitions, notifications)
        self._stale: set[int] = set()  # only the reading moved: stored every interval_s
        self._events: list[MonitorEvent] = []
        self._last = 0.0
        self._now = 0.0
        self._writing: asyncio.Future[None] | None = None
        self._force = False  # a forced flush came while a write was under way

    def changed(self, i: int) -> None:
        self._changed.add(i)

    def stale(self, i: int) -> None:
        self._stale.add(i)

    def event(self, event: MonitorEvent) -> None:
        self._events.append(event)

    def flush(self, now: float, *, force: bool = False) -> None:
        """Write changed states and new events now; stale states if the interval passed (or ``force``)."""
        self._now = max(self._now, now)
        if self._writing is not None:
            self._force = self._force or force
            return  # written when the write under way ends
        due = force or now - self._last >= self._interval_s
        indexes = self._changed | (self._stale if due else set())
        if not indexes and not self._events:
            return
        states = [self._state_of(i) for i in sorted(indexes)]
        events, self._events = self._events, []
        self._changed -= indexes
        self._stale -= indexes
        if due:
            self._last = now
        self._writing = asyncio.ensure_future(self._store.save_monitors(states, events))
        self._writing.add_done_callback(functools.partial(self._saved, indexes=indexes, events=events))

    async def drain(self, timeout_s: float) -> None:
        """Wait for the writes under way and those queued behind them (at most ``timeout_s``)."""
        deadline = time.monotonic() + max(0.1, timeout_s)
        while self._writing is not None and time.monotonic() < deadline:
            await asyncio.wait({self._writing}, timeout=max(0.0, deadline - time.monotonic()))
            await asyncio.sleep(0)  # let the done callback start the next write

    def _saved(self, future: asyncio.Future[None], *, indexes: set[int], events: list[MonitorEvent]) -> None:
        self._writing = None
        if future.cancelled() or future.exception() is None:
            force, self._force = self._force, False
            if self._changed or self._events or force:
                self.flush(self._now, force=force)
            return
        log.error("monitors: storing state failed, retrying with the next write: %s", future.exception())
        self._changed |= indexes
        self._events[:0] = events
        if len(self._events) > MAX_UNSTORED_EVENTS:
            dropped = len(self._events) - MAX_UNSTORED_EVENTS
            del self._events[:dropped]
            log.error("monitors: %d unstored event(s) dropped (the store keeps failing)", dropped)
