"""Where a feed of the segment log resumes, and which segments it lets go.

A feed's *saved offset* (in the store, :class:`~tracescorer.store.api.FeedState`) is where the next
start replays from: at most the feed's own offset, and held back to the oldest record a stage still
needs (:meth:`Position.add_hold`: assembly's traces not assembled yet, whose records are their only
copy). The assembly feed also *releases* the segments before what anyone still reads: its saved
offset less ``segment_log.retain_bytes``, what triage may read back, and another reader's place
(:meth:`Position.add_retain`: the span-rows feed, kept at most ``max_retain_bytes`` behind).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from tracescorer.seglog import LogReader
from tracescorer.store.api import FeedState, StoreError

log = logging.getLogger(__name__)

#: how often the offset is saved (and released segments deleted) while a feed runs
SAVE_EVERY_S = 1.0

Offset = Callable[[], int | None]


class Position:
    """One feed's saved offset and its part in releasing the log (see the module docstring)."""

    def __init__(
        self,
        segment_log: LogReader,
        state: FeedState,
        consumer: str,
        *,
        releases: bool,
        retain_bytes: int = 0,
        max_retain_bytes: int = 1 << 30,
    ) -> None:
        self._log = segment_log
        self._state = state
        self._consumer = consumer
        self._releases = releases  # the assembly feed releases; the span-rows feed is retained
        self._retain_bytes = retain_bytes
        self._max_retain_bytes = max_retain_bytes
        self._holds: list[Offset] = []
        self._retains: list[Offset] = []
        self.saved = 0  # as stored
        self._saved_at = 0.0

    def add_hold(self, oldest: Offset) -> None:
        """Keep the saved offset at or before ``oldest()`` (None: nothing held)."""
        self._holds.append(oldest)

    def add_retain(self, oldest: Offset) -> None:
        """Release no segment from ``oldest()`` on, without holding the saved offset back."""
        self._retains.append(oldest)

    async def save(self, offset: int, *, force: bool = False, skipped_from: int | None = None) -> None:
        """Save ``offset`` (less the holds) at most every :data:`SAVE_EVERY_S` unless ``force``
        (then a store error is raised), and release what no reader needs; ``skipped_from``: the
        oldest record triage may still read back."""
        now = time.monotonic()
        if not force and now - self._saved_at < SAVE_EVERY_S:
            return
        held = [o for o in (hold() for hold in self._holds) if o is not None]  # a scan of the buffer
        offset = min([offset, *held])
        self._saved_at = now
        if offset != self.saved:
            try:
                await self._state.set_feed_offset(offset, consumer=self._consumer)
            except StoreError as exc:
                if force:
                    raise
                log.debug("segment log feed: could not save its offset now (%s); trying again", exc)
                return
            self.saved = offset
        if not self._releases:
            return
        # also when this feed stood still: the span-rows feed or triage may have moved on
        keep_from = offset - self._retain_bytes
        for retain in self._retains:
            oldest = retain()
            if oldest is not None:
                keep_from = min(keep_from, max(oldest, offset - self._max_retain_bytes))
        if skipped_from is not None:
            keep_from = min(keep_from, skipped_from)
        released = await asyncio.to_thread(self._log.release_before, keep_from)
        if released:
            log.debug("segment log: released %d segment(s) before offset %d", released, offset)
