"""The one lifecycle every component of the daemon has, like OpenTelemetry's batch processor.

``start()`` brings a component up (raising, with nothing left running, when it cannot);
``stop(deadline)`` stops its intake, drains what it holds until ``deadline`` (a
:func:`time.monotonic` value), then releases what it owns and returns whether it drained in time.
:class:`Stages` enters components on one :class:`contextlib.AsyncExitStack` in dependency order and
stops them in reverse, each with the shared deadline less what the later stages keep.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Protocol, TypeVar


class Component(Protocol):
    async def start(self) -> None:
        """Start; on failure raise, leaving nothing running."""

    async def stop(self, deadline: float) -> bool:
        """Stop intake, drain until ``deadline`` (monotonic seconds), release; whether all drained."""


C = TypeVar("C", bound=Component)


def seconds_left(deadline: float, reserve_s: float = 0.0, *, floor_s: float = 0.1) -> float:
    """Seconds until ``deadline`` less ``reserve_s`` (kept for later stages), never below ``floor_s``."""
    return max(floor_s, deadline - time.monotonic() - reserve_s)


class Stages:
    """Components started in order on one exit stack; :meth:`aclose` stops them in reverse.

    ``deadline`` gives the stop's deadline when the stop begins (it is set then); each component
    may keep ``reserve_s`` of it for the components stopped after it.
    """

    def __init__(self, deadline: Callable[[], float]) -> None:
        self._deadline = deadline
        self._stack = contextlib.AsyncExitStack()

    async def enter(self, component: C, *, reserve_s: float = 0.0) -> C:
        """Start ``component``; it is stopped when the stages close."""
        await component.start()

        async def stop() -> None:
            await component.stop(self._deadline() - reserve_s)

        self._stack.push_async_callback(stop)
        return component

    @property
    def stack(self) -> contextlib.AsyncExitStack:
        """For callbacks that are not components (a flag to clear, a file to remove)."""
        return self._stack

    async def aclose(self) -> None:
        await self._stack.aclose()
