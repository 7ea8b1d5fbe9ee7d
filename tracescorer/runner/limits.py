"""Judge budgets: requests per minute (token bucket) and a daily spend in USD.

One daemon keeps both in memory (:class:`RateLimiter`, :class:`DailyBudget`). Daemons sharing a
PostgreSQL store share them: :class:`SharedRateLimiter` takes tokens from one bucket in the
database, and the runner keeps :class:`DailyBudget` in step with the day's spend stored there
(:meth:`DailyBudget.sync`), which every daemon adds to when it stores its scores.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

log = logging.getLogger(__name__)


class RateLimiter:
    """A token bucket of ``per_minute`` tokens refilled continuously; ``acquire`` waits. ``clock``
    (monotonic seconds) measures the refill and ``sleep`` lets the wait for it pass."""

    def __init__(
        self,
        per_minute: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.capacity = float(per_minute)
        self._rate = per_minute / 60.0
        self._tokens = float(per_minute)
        self._clock = clock
        self._sleep = sleep
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
                await self._sleep((tokens - self._tokens) / self._rate)


class Limiter(Protocol):
    capacity: float

    async def acquire(self, tokens: float = 1.0) -> None:
        """Wait until ``tokens`` requests may be made."""


class TokenSource(Protocol):
    async def take_judge_tokens(self, bucket: str, tokens: float, capacity: float, per_s: float) -> float: ...


class SharedRateLimiter:
    """``per_minute`` requests across every daemon of a shared store: one token bucket in the
    database, one round trip per acquisition (at most ``per_minute`` a minute). While the store
    cannot be reached the daemon falls back to a local bucket of the same size, so judging goes on
    at no more than one daemon's share of the limit times the daemons running."""

    def __init__(self, store: TokenSource, per_minute: int, *, bucket: str = "judge") -> None:
        self.capacity = float(per_minute)
        self._rate = per_minute / 60.0
        self._store = store
        self._bucket = bucket
        self._local = RateLimiter(per_minute)
        self._lock = asyncio.Lock()
        self._degraded = False

    async def acquire(self, tokens: float = 1.0) -> None:
        tokens = min(tokens, self.capacity)
        async with self._lock:  # first come, first served within this daemon
            while True:
                try:
                    wait_s = await self._store.take_judge_tokens(self._bucket, tokens, self.capacity, self._rate)
                except Exception as exc:  # noqa: BLE001 - the store is down: a local bucket meanwhile
                    if not self._degraded:
                        log.warning("shared judge rate limit unavailable (%s); limiting locally", exc)
                        self._degraded = True
                    await self._local.acquire(tokens)
                    return
                if self._degraded:
                    log.info("shared judge rate limit available again")
                    self._degraded = False
                if wait_s <= 0:
                    return
                await asyncio.sleep(min(wait_s, 5.0))


class DailyBudget:
    """Judge spend per UTC day; ``exhausted`` once ``limit_usd`` is reached (None = no limit)."""

    def __init__(
        self,
        limit_usd: float | None,
        *,
        spent_today_usd: float = 0.0,
        today: Callable[[], dt.date] = lambda: dt.datetime.now(dt.UTC).date(),
    ) -> None:
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

    def sync(self, spent_today_usd: float) -> None:
        """Take the day's spend as known elsewhere (the shared store, with what is not stored yet)."""
        _ = self.spent_usd  # roll the day over first
        self._spent = spent_today_usd

    @property
    def exhausted(self) -> bool:
        return self.limit_usd is not None and self.spent_usd >= self.limit_usd

    def detail(self) -> str:
        """Why a judge run is refused while :attr:`exhausted` (a decision's detail)."""
        return f"daily judge budget spent: ${self.spent_usd:.4f} of ${self.limit_usd:g}"
