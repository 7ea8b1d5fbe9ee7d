"""The segment log: accepted requests appended, group-committed with fdatasync, read back by consumers.

:meth:`SegmentLog.append` returns a record's offset once the record is on disk: a writer thread
takes whatever appends are queued, writes them in one go to the current segment, ``fdatasync``\\s
it, and answers them all (group commit: one sync for many requests). A segment that reaches
``segment_bytes`` is closed and a new one started (its directory entry synced). Appends are
refused (:class:`LogFull`, retryable) while the disk has less than ``min_free_bytes`` free, and
when a write fails for lack of space the segment is cut back to its last synced end, so no torn
record is left behind.

On :meth:`start` the segments are checked (:func:`~tracescorer.seglog.damage.repair`): a torn
tail of the last one is padded over, damage is reported (:attr:`SegmentLog.damage`), and the
log's end never moves back, so no offset is handed out twice. Consumers read records from an
offset (:meth:`read`, blocking: call it in a worker thread; damaged bytes are skipped, not the
records after them) and keep their own offsets; a segment is deleted (:meth:`release_before`)
once every consumer has passed it.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import logging
import os
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tracescorer.seglog.damage import Damage, repair, report
from tracescorer.seglog.segments import CorruptRecord, Record, frame, fsync_dir, read_range, segment_name, segments

if TYPE_CHECKING:
    from tracescorer.config import Settings
    from tracescorer.metrics.ingest import IngestFamilies

log = logging.getLogger(__name__)

#: how often the free disk space is looked at (a statvfs call) while appends come in
FREE_CHECK_S = 1.0


class LogError(Exception):
    """An append failed (retryable unless a subclass says otherwise)."""


class LogFull(LogError):
    """The disk is (nearly) full: appends are refused until space is freed."""


class LogClosed(LogError):
    """The log is stopping or stopped."""


@dataclass(slots=True)
class _Pending:
    data: bytes
    future: asyncio.Future[int]


class SegmentLog:
    """The log in ``directory`` (see the module docstring). ``sync=False`` skips fdatasync (tests
    of behaviour only; a crash may then lose acknowledged records). ``metrics`` count the damage
    found at open."""

    def __init__(
        self,
        directory: str | Path,
        *,
        segment_bytes: int = 64 << 20,
        min_free_bytes: int = 64 << 20,
        max_batch_bytes: int = 16 << 20,
        sync: bool = True,
        temporary: bool = False,
        metrics: IngestFamilies | None = None,
    ) -> None:
        self.directory = Path(directory)
        self._metrics = metrics
        self.damage: list[Damage] = []  # what the open found (shown in /readyz)
        self._temporary = temporary  # removed at stop (a store in memory has a log only while it runs)
        self.segment_bytes = segment_bytes
        self.min_free_bytes = min_free_bytes
        self.max_batch_bytes = max_batch_bytes
        self._sync = sync
        self._queue: deque[_Pending] = deque()
        self._cond = threading.Condition()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fd = -1
        self._base = 0  # base offset of the segment being written
        self._size = 0  # its synced length
        self._start = 0  # offset of the oldest record kept
        self._free = 1 << 62
        self._free_at = 0.0
        self.appended_bytes = 0  # framed bytes synced since start (for metrics)
        self.syncs = 0
        self._grown: asyncio.Event | None = None  # set when synced records were added
        self._paused = False  # pause(): appends stay queued (and counted in queued_bytes) until resume()
        # (end offset, wall time) per sync; appended by the writer thread, read on the event loop
        self._synced: deque[tuple[int, float]] = deque(maxlen=8192)
        self._synced_lock = threading.Lock()

    # --- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open (creating the directory; repairing the segments) and start the writer."""
        self._loop = asyncio.get_running_loop()
        self._grown = asyncio.Event()
        await asyncio.to_thread(self._open)
        self._thread = threading.Thread(target=self._write_loop, name="seglog-writer", daemon=True)
        self._thread.start()

    def _open(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = segments(self.directory)
        if not found:
            self._create(0)
            return
        self._start = found[0][0]
        self.damage, size = repair(found)
        for damage in self.damage:
            report(damage, "open", self._metrics)
        self._base, self._size = found[-1][0], size
        self._fd = os.open(found[-1][1], os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)

    def _create(self, base: int) -> None:
        path = self.directory / segment_name(base)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fsync_dir(self.directory)
        self._base, self._size = base, 0

    async def stop(self, deadline: float) -> bool:
        """Refuse new appends, write and sync what is queued (until ``deadline``), close."""
        with self._cond:
            self._closing = True
            self._paused = False
            self._cond.notify_all()
        thread = self._thread
        if thread is not None:
            await asyncio.to_thread(thread.join, max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                return False
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._temporary:
            shutil.rmtree(self.directory, ignore_errors=True)
        return True

    @property
    def kept_bytes(self) -> int:
        """Bytes of records kept on disk."""
        return self.end_offset - self._start

    # --- appends -------------------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        """Where the next record goes: every record before it is synced."""
        return self._base + self._size

    @property
    def start_offset(self) -> int:
        """Where the oldest record kept starts."""
        return self._start

    @property
    def queued_bytes(self) -> int:
        return sum(len(p.data) for p in self._queue)

    async def append(self, kind: int, payload: bytes) -> int:
        """Append one record; returns its offset once it is synced. Raises :class:`LogFull` (disk
        short of ``min_free_bytes``), :class:`LogClosed` or :class:`LogError`."""
        loop = self._loop
        if loop is None:
            raise LogClosed("the segment log is not open")
        future: asyncio.Future[int] = loop.create_future()
        with self._cond:
            if self._closing:
                raise LogClosed("the segment log is stopping")
            self._queue.append(_Pending(frame(kind, payload), future))
            self._cond.notify()
        return await future

    def disk_free(self) -> int:
        """Free bytes on the log's disk (looked at once a second at most)."""
        now = time.monotonic()
        if now - self._free_at >= FREE_CHECK_S:
            self._free_at = now
            self._free = shutil.disk_usage(self.directory).free
        return self._free

    def _write_loop(self) -> None:
        while True:
            with self._cond:
                while (not self._queue or self._paused) and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                batch: list[_Pending] = []
                size = 0
                while self._queue and (not batch or size + len(self._queue[0].data) <= self.max_batch_bytes):
                    item = self._queue.popleft()
                    batch.append(item)
                    size += len(item.data)
            self._commit(batch)

    def pause(self) -> None:
        """Keep appends queued, unwritten and unanswered until :meth:`resume` (tests and drills fill
        the pipeline with it). Thread-safe."""
        with self._cond:
            self._paused = True

    def resume(self) -> None:
        """Write what :meth:`pause` held, as usual. Thread-safe."""
        with self._cond:
            self._paused = False
            self._cond.notify()

    def _commit(self, batch: list[_Pending]) -> None:
        data = b"".join(p.data for p in batch)
        if self.disk_free() - len(data) < self.min_free_bytes:
            self._free_at = 0.0  # look again next time: space may have been freed meanwhile
            self._fail(batch, LogFull(f"disk nearly full: {self._free} bytes free (log.min_free_bytes)"))
            return
        try:
            if self._size and self._size + len(data) > self.segment_bytes:
                self._roll()
            _write_all(self._fd, data)
            if self._sync:
                os.fdatasync(self._fd)
        except OSError as exc:
            self._cut_back()
            full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
            self._free_at = 0.0  # look at the disk again at once (readiness asks too)
            self._fail(batch, (LogFull if full else LogError)(f"segment log write failed: {exc}"))
            return
        offsets = []
        offset = self.end_offset
        for p in batch:
            offsets.append(offset)
            offset += len(p.data)
        self._size += len(data)
        self.appended_bytes += len(data)
        self.syncs += 1
        with self._synced_lock:
            self._synced.append((self.end_offset, time.time()))
        self._answer(batch, offsets)

    def _roll(self) -> None:
        if self._sync:
            os.fsync(self._fd)
        os.close(self._fd)
        self._fd = -1
        self._create(self.end_offset)

    def _cut_back(self) -> None:
        """After a failed write: the segment back to its synced end (no torn record stays)."""
        try:
            os.ftruncate(self._fd, self._size)
        except OSError as exc:  # the next open pads the tail over anyway
            log.error("segment log: cannot cut a failed write off %s: %s", segment_name(self._base), exc)

    def _answer(self, batch: list[_Pending], offsets: list[int]) -> None:
        def resolve() -> None:
            for p, offset in zip(batch, offsets, strict=True):
                if not p.future.done():
                    p.future.set_result(offset)
            if self._grown is not None:
                self._grown.set()

        self._call(resolve)

    def _fail(self, batch: Iterable[_Pending], error: Exception) -> None:
        items = list(batch)

        def reject() -> None:
            for p in items:
                if not p.future.done():
                    p.future.set_exception(error)

        self._call(reject)

    def _call(self, fn: object) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(fn)  # type: ignore[arg-type]

    # --- reading and releasing ---------------------------------------------------------------------

    async def wait_beyond(self, offset: int, timeout_s: float) -> bool:
        """Wait (up to ``timeout_s``) until a synced record ends after ``offset``; whether one does."""
        grown = self._grown
        while self.end_offset <= offset and grown is not None:
            grown.clear()
            if self.end_offset > offset:
                break
            try:
                await asyncio.wait_for(grown.wait(), timeout_s)
            except TimeoutError:
                return self.end_offset > offset
        return self.end_offset > offset

    def synced_at(self, offset: int) -> float | None:
        """When (epoch seconds) the record at ``offset`` was synced, if it was among the last few
        thousand syncs."""
        with self._synced_lock:
            synced = list(self._synced)
        for end, when in synced:
            if end > offset:
                return when
        return None

    def read(self, start: int, max_bytes: int) -> list[Record]:
        """Synced records from offset ``start`` (the end of a record; an offset before the oldest
        segment kept reads from it), about ``max_bytes`` of payload at most. Blocking file I/O: call
        it in a worker thread. Raises :class:`~tracescorer.seglog.segments.LogGap` (or
        :class:`CorruptRecord`, damaged bytes) when no record comes first, saying where to go on."""
        return read_range(self.directory, start, self.end_offset, max_bytes)

    def release_before(self, offset: int) -> int:
        """Delete every segment that ends at or before ``offset`` (never the one being written);
        how many were deleted."""
        found = segments(self.directory)
        deleted = 0
        for (base, path), (next_base, _) in itertools.pairwise(found):
            if next_base > offset or base == self._base:
                break
            path.unlink()
            deleted += 1
        if deleted:
            fsync_dir(self.directory)
            self._start = segments(self.directory)[0][0]
        return deleted


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def build_segment_log(settings: Settings, metrics: IngestFamilies | None = None) -> SegmentLog:
    """The segment log the settings ask for: ``segment_log.path``, else beside ``store.path``
    (``<path>.log``), else (a store in memory) a temporary directory removed at stop."""
    s = settings.segment_log
    temporary = False
    if s.path:
        directory = Path(s.path)
    elif settings.store.path != ":memory:":
        directory = Path(settings.store.path + ".log")
    else:
        directory, temporary = Path(tempfile.mkdtemp(prefix="tracescorer-log-")), True
    return SegmentLog(
        directory,
        segment_bytes=s.segment_bytes,
        min_free_bytes=s.min_free_bytes,
        sync=s.sync,
        temporary=temporary,
        metrics=metrics,
    )


__all__ = ["CorruptRecord", "LogClosed", "LogError", "LogFull", "Record", "SegmentLog", "build_segment_log"]
