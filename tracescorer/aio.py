"""Small asyncio helpers shared by the pipeline's components."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from typing import Any


async def cancel(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel ``tasks`` (None entries skipped), then wait until each has stopped."""
    live = [t for t in tasks if t is not None]
    for task in live:
        task.cancel()
    for task in live:
        with contextlib.suppress(asyncio.CancelledError):
            await task


class LoopLagWatch:
    """How late the event loop runs a timer, every ``interval_s``, handed to ``observe`` (seconds):
    anything blocking the loop shows here, and in every request's latency."""

    def __init__(self, observe: Callable[[float], None], interval_s: float = 0.1) -> None:
        self._observe = observe
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="loop-lag")

    async def stop(self, deadline: float) -> bool:
        await cancel([self._task])
        return True

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self._interval_s
            await asyncio.sleep(self._interval_s)
            self._observe(max(0.0, loop.time() - due))
