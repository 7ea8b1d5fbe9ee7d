"""Judge budgets: requests per minute (token bucket) and a daily spend in USD."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable


class RateLimiter:
    """A token bucket of ``per_minute`` tokens refilled continuously; ``acquire`` waits."""

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = float(per_minute)
        self._rate = per_minute / 60.0
        self._tokens = float(per_minute)
        self._clock = clock
        self._last = clock()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._last) * self._rate)
        self._last = now

    async def acquire(self, tokens: float = 1.0) -> None:
        tokens = min(tokens, self.capacity)
        async with self._lock:  # first come, first served
            while True:
                self._refill()
                if self._tokens >= tokens:
                    self._tokens -= tokens
                    return
                await asyncio.sleep((tokens - self._tokens) / self._rate)


class DailyBudget:
    """Judge spend per UTC day; ``exhausted`` once ``limit_usd`` is reached (None = no limit)."""

    def __init__(self, limit_usd: float | None, *, spent_today_usd: float = 0.0,
                 today: Callable[[], dt.date] = lambda: dt.datetime.now(dt.timezone.utc).date()) -> None:
        self.limit_usd = limit_usd
        self._today = today
        self._day = today()
        self._spent = spent_today_usd

    @property
    def spent_usd(self) -> float:
        if self._today() != self._day:
            self._day, self._spent = self._today(), 0.0
        return self._spent

    def add(self, cost_usd: float | None) -> None:
        if cost_usd:
            _ = self.spent_usd  # roll the day over first
            self._spent += cost_usd

    @property
    def exhausted(self) -> bool:
        return self.limit_usd is not None and self.spent_usd >= self.limit_usd
