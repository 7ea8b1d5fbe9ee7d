"""Backfill: score stored runs or conversations with one bound scorer (new or changed).

Uses the live runner's decisions, queues, judge limits and budget, with ``source='backfill'``;
keeps at most half the scoring queue in flight so live traffic is not starved.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from tracescorer.filters import RunFilter
from tracescorer.scoring.decider import decide
from tracescorer.scoring.runner import Decision, ScoringRunner
from tracescorer.scoring.targets import Target, conversation_target, run_target
from tracescorer.store.api import RunStore

BATCH = 200


class BackfillError(ValueError):
    """The backfill request is invalid (unknown scorer, bad filter)."""


@dataclass(frozen=True, slots=True)
class BackfillRequest:
    scorer_id: str
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    filter: dict[str, Any] = field(default_factory=dict)
    dry_run: bool = False


@dataclass(slots=True)
class BackfillProgress:
    total: int = 0
    done: int = 0
    decisions: Counter[str] = field(default_factory=Counter)
    cost_usd: float = 0.0
    finished: bool = False
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "done": self.done,
            "decisions": dict(self.decisions),
            "cost_usd": round(self.cost_usd, 6),
            "finished": self.finished,
            "error": self.error,
        }


async def _load_targets(store: RunStore, scope: str, ids: list[str]) -> list[Target]:
    if scope == "run":
        return [run_target(run) for run in await store.load_runs(ids)]
    out = []
    for cid in ids:
        conversation = await store.load_conversation(cid)
        if conversation is not None:
            out.append(conversation_target(conversation))
    return out


async def run_backfill(
    runner: ScoringRunner,
    request: BackfillRequest,
    progress: BackfillProgress,
    *,
    on_progress: Callable[[BackfillProgress], None] | None = None,
) -> BackfillProgress:
    """Score every stored target of the scorer's scope in the time range; fills ``progress``."""
    bound = runner.binding(request.scorer_id)
    if bound is None:
        known = ", ".join(b.binding.id for b in runner.bindings) or "none"
        raise BackfillError(f"scorer {request.scorer_id!r} is not bound in the configuration (bound: {known})")
    try:
        extra = RunFilter.model_validate(request.filter) if request.filter else None
    except ValidationError as exc:
        raise BackfillError(f"invalid --filter: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None
    extra_check = (lambda t: extra.check(t.subject)) if extra is not None else None
    scope = bound.binding.scope
    store = runner.runs
    ids = await store.target_ids(scope, since=request.since, until=request.until)
    progress.total = len(ids)
    spent_before = runner.budget.spent_usd
    window = max(1, runner.queue_capacity // 2)
    for start in range(0, len(ids), BATCH):
        chunk = ids[start : start + BATCH]
        targets = await _load_targets(store, scope, chunk)
        pending: list[asyncio.Future[Decision]] = []
        for target in targets:
            if request.dry_run:  # what the live decider would say, without the budget
                verdict = decide(bound, target, budget_exhausted=False, extra_check=extra_check).decision
                progress.decisions["would_score" if verdict is Decision.RUN else str(verdict)] += 1
                progress.done += 1
                continue
            decided = runner.decide(bound, target, "backfill", extra_check)
            if isinstance(decided, str):
                progress.decisions[decided] += 1
                progress.done += 1
            else:
                pending.append(decided)
            if len(pending) >= window:
                await _drain(pending, progress, runner, spent_before, on_progress)
        await _drain(pending, progress, runner, spent_before, on_progress)
        if on_progress is not None:
            on_progress(progress)
    await runner.flush()  # the summary is only reported once its scores are committed
    progress.finished = True
    return progress


async def _drain(
    pending: list[asyncio.Future[Decision]],
    progress: BackfillProgress,
    runner: ScoringRunner,
    spent_before: float,
    on_progress: Callable[[BackfillProgress], None] | None,
) -> None:
    for fut in asyncio.as_completed(list(pending)):
        progress.decisions[await fut] += 1
        progress.done += 1
        progress.cost_usd = max(0.0, runner.budget.spent_usd - spent_before)
        if on_progress is not None:
            on_progress(progress)
    pending.clear()
