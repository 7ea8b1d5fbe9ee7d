"""Per-binding caps (``scorers[].limits``): a daily judge spend and judge requests per minute of one
binding, beside the global ``judge:`` limits.

A cap refuses, it never waits: a target over a binding's daily budget gets ``budget_exhausted``
and one that would exceed its requests per minute gets ``rate_limited``, each with a detail naming
the cap (``explain`` shows it), while every other binding goes on. Waiting in a worker would hold
the judge workers all bindings share. With several daemons on one PostgreSQL store the
requests-per-minute bucket is shared (a bucket per binding in ``judge_tokens``) and the spend is
read back from the stored scores now and then (:meth:`BindingCaps.sync`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from tracescorer.runner.bindings import BoundScorer
from tracescorer.runner.limits import DailyBudget, TokenSource
from tracescorer.store.api import ScoreStore

log = logging.getLogger(__name__)


class CallBucket:
    """``per_minute`` tokens refilled continuously; :meth:`try_take` takes or refuses, never waits."""

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = float(per_minute)
        self.per_s = per_minute / 60.0
        self._tokens = float(per_minute)
        self._clock = clock
        self._last = clock()

    def try_take(self, tokens: float) -> bool:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.per_s)
        self._last = now
        tokens = min(tokens, self.capacity)
        if self._tokens >= tokens:
            self._tokens -= tokens
            return True
        return False


def budget_key(binding_id: str) -> str:
    """The key of a binding's cap in messages: where it is configured."""
    return f"scorers[{binding_id}].limits"


class BindingCaps:
    """The caps of every binding that has some (see the module docstring); on the event loop."""

    def __init__(self, bound: Sequence[BoundScorer], *, shared: TokenSource | None = None) -> None:
        self._budgets: dict[str, DailyBudget] = {}
        self._buckets: dict[str, CallBucket] = {}
        self.rebind(bound)
        self._shared = shared
        self._degraded = False

    def rebind(self, bound: Sequence[BoundScorer]) -> None:
        """The caps of ``bound`` (a reload): a binding keeps its spend today, and its tokens while its rate is unchanged."""
        budgets, buckets = self._budgets, self._buckets
        self._budgets, self._buckets = {}, {}
        for b in bound:
            limits, bid = b.binding.limits, b.binding.id
            if (usd := limits.daily_budget_usd) is not None:
                spent = budgets[bid].spent_usd if bid in budgets else 0.0
                self._budgets[bid] = DailyBudget(usd, spent_today_usd=spent)
            if (rpm := limits.requests_per_minute) is not None:
                bucket = buckets.get(bid)
                self._buckets[bid] = bucket if bucket is not None and bucket.capacity == rpm else CallBucket(rpm)

    @property
    def budgeted(self) -> list[str]:
        """Binding ids with a daily budget (their spend is read from the store)."""
        return list(self._budgets)

    def spent_usd(self, binding_id: str) -> float | None:
        budget = self._budgets.get(binding_id)
        return None if budget is None else budget.spent_usd

    def budget_refusal(self, binding_id: str) -> str | None:
        """Why the binding may not run now for its daily budget (None: it may)."""
        budget = self._budgets.get(binding_id)
        if budget is None or not budget.exhausted:
            return None
        return (
            f"{budget_key(binding_id)}.daily_budget_usd reached: ${budget.spent_usd:.4f} of "
            f"${budget.limit_usd:g} spent today (UTC); other scorers go on"
        )

    async def take(self, bound: BoundScorer) -> str | None:
        """Take the binding's judge requests for one run from its bucket; why not when refused."""
        bucket = self._buckets.get(bound.binding.id)
        if bucket is None:
            return None
        tokens = float(max(1, bound.judge_requests))
        taken = await self._take_shared(bound.binding.id, bucket, tokens) if self._shared else bucket.try_take(tokens)
        if taken:
            return None
        return (
            f"{budget_key(bound.binding.id)}.requests_per_minute={bucket.capacity:g} reached "
            f"(a run takes {tokens:g} judge request(s)); other scorers go on"
        )

    async def _take_shared(self, binding_id: str, bucket: CallBucket, tokens: float) -> bool:
        assert self._shared is not None
        try:
            wait_s = await self._shared.take_judge_tokens(f"scorer:{binding_id}", tokens, bucket.capacity, bucket.per_s)
        except Exception as exc:  # noqa: BLE001 - the store is down: this daemon's own bucket meanwhile
            if not self._degraded:
                log.warning("shared per-scorer rate limits unavailable (%s); limiting locally", exc)
                self._degraded = True
            return bucket.try_take(tokens)
        self._degraded = False
        return wait_s <= 0

    def add(self, binding_id: str, cost_usd: float | None) -> None:
        budget = self._budgets.get(binding_id)
        if budget is not None:
            budget.add(cost_usd)

    def sync(self, spent_today_usd: dict[str, float]) -> None:
        """Take each budgeted binding's spend as stored (the larger of it and what this daemon
        counted: its own last scores may not be stored yet)."""
        for binding_id, budget in self._budgets.items():
            budget.sync(max(budget.spent_usd, spent_today_usd.get(binding_id, 0.0)))


async def sync_shared_spend(
    budget: DailyBudget, caps: BindingCaps, scores: ScoreStore, uncommitted_usd: Callable[[], float], every_s: float
) -> None:
    """Shared store: keep the daily budget (when it has a limit) and the binding caps in step with
    every daemon's stored spend, and this one's not stored yet."""
    while True:
        await asyncio.sleep(every_s)
        try:
            if budget.limit_usd is not None:
                budget.sync(await scores.spent_today_usd() + uncommitted_usd())
            if caps.budgeted:
                caps.sync(await scores.spent_today_by_scorer(caps.budgeted))
        except Exception as exc:  # noqa: BLE001 - keep the local count meanwhile
            log.debug("budget sync failed: %s", exc)
