"""The time the pipeline reads: one :class:`Clock` per App, handed to each component that waits out
a period (assembly idle, conversation idle, monitor windows and pending periods, heal backoff), so
a test can let time pass by moving a clock it holds instead of sleeping."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Wall-clock and monotonic seconds."""

    def time(self) -> float:
        """Seconds since the epoch (what is stored and compared with stored times)."""
        ...

    def monotonic(self) -> float:
        """Seconds that never go back (periods and deadlines within this process)."""
        ...


class SystemClock:
    """The machine's clocks."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK: Clock = SystemClock()
