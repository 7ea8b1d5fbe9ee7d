"""The segment log as a consumer in another process sees it (a worker process of the daemon).

The daemon's main process writes the log (:class:`~tracescorer.seglog.log.SegmentLog`) and tells
each worker how far it is synced (:meth:`LogView.advance`); the worker reads the records from the
segment files itself, never past that end (what follows may be half written). Segments are
deleted by the writer only, once every consumer passed them: a view's :meth:`release_before`
notes how far its consumer no longer needs the log (:attr:`LogView.keep_from`), for the writer.
:class:`LogReader` is what a consumer needs of either.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from pathlib import Path
from typing import Protocol

from tracescorer.seglog.segments import Record, read_range, segments


class LogReader(Protocol):
    """What a consumer of the log (the feed) reads: the writer itself or a view of it."""

    directory: Path

    @property
    def end_offset(self) -> int: ...

    @property
    def start_offset(self) -> int: ...

    async def wait_beyond(self, offset: int, timeout_s: float) -> bool: ...

    def synced_at(self, offset: int) -> float | None: ...

    def read(self, start: int, max_bytes: int) -> list[Record]:
        """Records from ``start``; raises :class:`~tracescorer.seglog.segments.LogGap` (damaged
        bytes: :class:`~tracescorer.seglog.segments.CorruptRecord`) when none comes first."""
        ...

    def release_before(self, offset: int) -> int: ...


class LogView:
    """A read-only view of the log in ``directory``, synced up to what :meth:`advance` said."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._end = 0
        self._grown = asyncio.Event()
        self._synced: deque[tuple[int, float]] = deque(maxlen=8192)
        #: the consumer no longer needs records before this offset (reported to the writer)
        self.keep_from = 0

    def advance(self, end: int, synced_at: float | None = None) -> None:
        """The writer synced every record before ``end`` (at ``synced_at``, epoch seconds); on the
        event loop."""
        if end > self._end:
            self._end = end
            self._synced.append((end, time.time() if synced_at is None else synced_at))
            self._grown.set()

    @property
    def end_offset(self) -> int:
        return self._end

    @property
    def start_offset(self) -> int:
        found = segments(self.directory)
        return found[0][0] if found else self._end

    async def wait_beyond(self, offset: int, timeout_s: float) -> bool:
        """Wait (up to ``timeout_s``) until the synced end is past ``offset``; whether it is."""
        if self._end > offset:
            return True
        self._grown.clear()
        try:
            await asyncio.wait_for(self._grown.wait(), timeout_s)
        except TimeoutError:
            pass
        return self._end > offset

    def synced_at(self, offset: int) -> float | None:
        """When the record at ``offset`` was synced, as the writer said (the last few thousand)."""
        for end, when in list(self._synced):
            if end > offset:
                return when
        return None

    def read(self, start: int, max_bytes: int) -> list[Record]:
        """Synced records from ``start`` (blocking file I/O: call it in a worker thread), as
        :meth:`~tracescorer.seglog.log.SegmentLog.read` reads them."""
        return read_range(self.directory, start, self._end, max_bytes)

    def release_before(self, offset: int) -> int:
        """Note that records before ``offset`` are no longer needed; the writer deletes segments."""
        self.keep_from = offset
        return 0
