"""The store's errors, and the narrowing write that keeps one refused item from holding back the rest.

Re-exported by :mod:`tracescorer.store.api`, which stages import instead of this module.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class StoreError(RuntimeError):
    """A store operation failed (retryable unless a subclass says otherwise)."""


class QueueFull(StoreError):
    """The write queue is full; retry later."""


class StoreUnavailable(StoreError):
    """The store cannot answer now: its process died and is being started again, or it is not
    open; the same request succeeds later (the query API answers 503 with Retry-After)."""


class StoreClosed(StoreUnavailable):
    """The store no longer accepts writes (shutting down)."""


class DiskFull(StoreError):
    """A file of the daemon could not be written at its start for want of disk space; the message
    names the file and its disk's free bytes (:func:`disk_full`). A running daemon's writes wait
    for space instead (:mod:`tracescorer.store.duckdb.space`)."""


def disk_full(path: str | os.PathLike[str], cause: BaseException) -> DiskFull | None:
    """The :class:`DiskFull` for ``cause`` when it says the disk had no space left while ``path``
    was written (an OSError's ENOSPC, or DuckDB's error quoting it); None for any other error."""
    if not (isinstance(cause, OSError) and cause.errno == errno.ENOSPC) and os.strerror(errno.ENOSPC) not in str(cause):
        return None
    folder = os.path.abspath(path)
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    try:
        free = f"{shutil.disk_usage(folder).free} bytes free"
    except OSError as exc:  # the message still names the path
        free = f"free space unknown: {exc.strerror}"
    why = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(cause)
    return DiskFull(f"cannot write {os.fspath(path)}: its disk is full ({free} in {folder}): {why}")


class ReadOnlyViolation(StoreError):
    """A statement other than a plain read was given to a read-only query."""


class DataError(StoreError):
    """The data cannot be stored (a value out of range, a bad type): the client's fault, never
    retryable."""


class StoreLocked(StoreError):
    """Another process holds the database file (a daemon starting or running, or a stray writer)."""


class SchemaError(StoreError):
    """A database's schema is newer than this program, or not one of its versions."""


#: What a store raises for data it cannot hold: its DataError, or what the row encoders raise
#: (orjson's TypeError for lone surrogates and integers past 64 bits, Arrow's OverflowError).
#: Retrying such a write can never succeed.
REFUSED: tuple[type[Exception], ...] = (DataError, TypeError, ValueError, OverflowError)


async def write_narrowing(
    items: list[T],
    write: Callable[[list[T], bool], Awaitable[None]],
    refused: Callable[[T, Exception], Awaitable[None]],
) -> list[T]:
    """``write(items, False)``; when the store refuses them as data (:data:`REFUSED`), write them
    by halves (``write(part, True)``: a retry) down to single items and hand each one still refused
    to ``refused``, so one bad item cannot hold back the others for good. Returns the items written
    as they were; other errors propagate."""

    async def attempt(part: list[T], retry: bool) -> list[T]:
        try:
            await write(part, retry)
            return part
        except REFUSED as exc:
            if len(part) == 1:
                await refused(part[0], exc)
                return []
            half = len(part) // 2
            return [*await attempt(part[:half], True), *await attempt(part[half:], True)]

    return await attempt(items, False)
