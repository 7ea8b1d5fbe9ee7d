"""A bounded queue with a fixed number of async workers, with the lifecycle of OpenTelemetry's
``BatchSpanProcessor``: :meth:`start`, :meth:`force_flush` (wait until everything submitted is
done), :meth:`shutdown` (stop intake, let the queue drain until a deadline, then cancel what still
runs and hand back every item that did not finish, so the caller can make up for it).

Items are handled one at a time per worker by ``handle(item)``; an exception it raises is logged
and the worker goes on. Nothing is dropped silently: :meth:`submit` returns False when the queue
is full or the pool is shut down, and :meth:`shutdown` returns what was abandoned.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from tracescorer.aio import cancel

log = logging.getLogger(__name__)
T = TypeVar("T")

TURN_S = 0.002  # longest a worker runs items back to back before the event loop gets a turn


class WorkerPool(Generic[T]):
    """``workers`` tasks taking items from a queue of at most ``max_queue``; runs on one event loop."""

    def __init__(self, name: str, *, workers: int, max_queue: int, handle: Callable[[T], Awaitable[object]]) -> None:
        if workers < 1 or max_queue < 1:
            raise ValueError("workers >= 1 and max_queue >= 1 required")
        self.name = name
        self._workers = workers
        self._handle = handle
        self._limit = max_queue
        # unbounded underneath: submit() enforces the limit, except for items that may pass it
        self._queue: asyncio.Queue[T] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._running: dict[asyncio.Task[None], T] = {}
        self._accepting = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._unfinished = 0

    @property
    def maxsize(self) -> int:
        return self._limit

    def qsize(self) -> int:
        return self._queue.qsize()

    @property
    def in_flight(self) -> int:
        return len(self._running)

    @property
    def accepting(self) -> bool:
        return self._accepting

    def start(self) -> None:
        if self._tasks:
            return
        self._accepting = True
        self._tasks = [asyncio.create_task(self._work(), name=f"{self.name}-worker-{i}") for i in range(self._workers)]

    def submit(self, item: T, *, past_limit: bool = False) -> bool:
        """Queue ``item``; False when the pool no longer accepts work, or when the queue holds
        ``max_queue`` items and ``past_limit`` is not set (the caller bounds those items itself)."""
        if not self._accepting or (not past_limit and self._queue.qsize() >= self._limit):
            return False
        self._queue.put_nowait(item)
        self._unfinished += 1
        self._idle.clear()
        return True

    async def _work(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        turn = time.perf_counter()
        while True:
            if self._queue.empty():
                item = await self._queue.get()
                turn = time.perf_counter()
            elif time.perf_counter() - turn > TURN_S:
                # items that never suspend (code scorers) would drain the whole queue in one turn
                # of the event loop, holding every acknowledgement meanwhile
                await asyncio.sleep(0)
                turn = time.perf_counter()
                continue
            else:
                item = self._queue.get_nowait()
            self._running[task] = item
            try:
                await self._handle(item)
            except asyncio.CancelledError:
                raise
            except Exception:  # a worker must survive anything an item does
                log.exception("%s: handling an item failed", self.name)
            finally:
                self._running.pop(task, None)
                self._queue.task_done()
                self._unfinished -= 1
                if self._unfinished == 0:
                    self._idle.set()

    async def force_flush(self, timeout_s: float) -> bool:
        """Wait until every item submitted so far was handled; False on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), max(0.0, timeout_s))
        except TimeoutError:
            return False
        return True

    async def shutdown(self, timeout_s: float) -> list[T]:
        """Stop intake, drain until ``timeout_s`` from now, then cancel the workers. Returns the
        items that were not handled to the end (still queued, or cancelled while running)."""
        self._accepting = False
        deadline = time.monotonic() + timeout_s
        if self._tasks:
            await self.force_flush(max(0.0, deadline - time.monotonic()))
        abandoned = list(self._running.values())
        await cancel(self._tasks)
        self._tasks = []
        self._running.clear()
        while True:
            try:
                abandoned.append(self._queue.get_nowait())
            except asyncio.QueueEmpty:
                break
        self._unfinished = 0
        self._idle.set()
        if abandoned:
            log.warning("%s: %d item(s) abandoned at shutdown", self.name, len(abandoned))
        return abandoned
