"""A segment log on a test's files: opened and stopped as the daemon does."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tracescorer.seglog import SegmentLog


async def open_log(path: Path, **kw: Any) -> SegmentLog:
    """The log in ``path``, started (no disk reserve: a test's files are small)."""
    log = SegmentLog(path, min_free_bytes=0, **kw)
    await log.start()
    return log


async def stop_log(log: SegmentLog) -> None:
    assert await log.stop(time.monotonic() + 10)
