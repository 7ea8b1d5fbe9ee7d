"""Small asyncio helpers shared by the pipeline's components."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any


async def cancel(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel ``tasks`` (None entries skipped), then wait until each has stopped."""
    live = [t for t in tasks if t is not None]
    for task in live:
        task.cancel()
    for task in live:
        with contextlib.suppress(asyncio.CancelledError):
            await task
