"""Holding a running store's writer from a test, so its queue fills deterministically."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from support import store_ops
from support.daemon import wait_for_async


class WriterGate:
    """``async with WriterGate(store, tmp_path):`` holds the writer until the block exits (or
    :meth:`open` is called)."""

    def __init__(self, store: Any, tmp_path: Path, timeout_s: float = 30.0) -> None:
        self._store = store
        self._started = tmp_path / "gate.started"
        self._release = tmp_path / "gate.release"
        self._timeout_s = timeout_s
        self._task: asyncio.Task[Any] | None = None

    async def __aenter__(self) -> WriterGate:
        self._started.unlink(missing_ok=True)
        self._release.unlink(missing_ok=True)
        self._task = asyncio.create_task(
            self._store.write(store_ops.hold_writer, str(self._started), str(self._release), self._timeout_s)
        )
        await wait_for_async(self._started.exists, 20, what="the writer to be held")
        return self

    def open(self) -> None:
        self._release.touch()

    async def __aexit__(self, *exc: object) -> None:
        self.open()
        if self._task is not None:
            await self._task


class LogGate:
    """``async with LogGate(app.segment_log):`` holds the segment log's writer until the block exits
    (or :meth:`open` is called, from any thread): requests are taken but not acknowledged."""

    def __init__(self, segment_log: Any) -> None:
        self._log = segment_log

    async def __aenter__(self) -> LogGate:
        self._log.pause()
        return self

    def open(self) -> None:
        self._log.resume()

    async def __aexit__(self, *exc: object) -> None:
        self.open()


class FeedGate:
    """``async with FeedGate(app.feed):`` holds the segment log's feed back (acknowledged requests
    stay in the log, unread) until the block exits or :meth:`open` is called."""

    def __init__(self, feed: Any) -> None:
        self.held = True
        feed.add_gate("test", lambda: "held by the test" if self.held else None)

    async def __aenter__(self) -> FeedGate:
        return self

    def open(self) -> None:
        self.held = False

    async def __aexit__(self, *exc: object) -> None:
        self.open()
