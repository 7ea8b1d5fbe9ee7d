"""The store's errors, and the narrowing write that keeps one refused item from holding back the rest.

Re-exported by :mod:`tracescorer.store.api`, which stages import instead of this module.
"""

from __future__ import annotations

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
