"""Backfill: score stored runs or conversations with one bound scorer (new or changed).

Uses the live runner's decisions, queues, judge limits and budget, with ``source='backfill'``;
keeps at most half the scoring queue in flight so live traffic is not starved. The targets are
every stored one of the scorer's scope in the time range, or the ids the request names; ``only``
narrows them to those whose score of this scorer is an error (``error``) or absent (``missing``).
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
from tracescorer.runner.decider import decide
from tracescorer.runner.stage import Decision, ScoringRunner
from tracescorer.runner.targets import Target, TargetKind, conversation_target, run_target, target_score_id
from tracescorer.store.api import RunStore, ScoreStore

BATCH = 200
STATUS_BATCH = 2000  # score ids looked up at a time


class BackfillError(ValueError):
    """The backfill request is invalid (unknown scorer, bad filter)."""


ONLY = ("error", "missing")


@dataclass(frozen=True, slots=True)
class BackfillRequest:
    """What to re-score: ``targets`` (run or conversation ids of the scorer's scope) replace the
    time range; ``only`` keeps the targets whose score is an error, or that have none."""

    scorer_id: str
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    filter: dict[str, Any] = field(default_factory=dict)
    dry_run: bool = False
    only: str | None = None
    targets: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.only is not None and self.only not in ONLY:
            raise ValueError(f"only must be one of {', '.join(ONLY)}, not {self.only!r}")

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> BackfillRequest:
        """The request as the CLI sends it to the daemon (ISO times); ValueError/KeyError/TypeError if malformed."""
        targets = payload.get("targets")
        if targets is not None and not (isinstance(targets, list) and all(isinstance(t, str) for t in targets)):
            raise TypeError("targets must be a list of ids")
        return cls(
            scorer_id=str(payload["scorer"]),
            since=dt.datetime.fromisoformat(payload["since"]) if payload.get("since") else None,
            until=dt.datetime.fromisoformat(payload["until"]) if payload.get("until") else None,
            filter=dict(payload.get("filter") or {}),
            dry_run=bool(payload.get("dry_run", False)),
            only=payload.get("only") or None,
            targets=tuple(targets) if targets is not None else None,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "scorer": self.scorer_id,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "filter": self.filter,
            "dry_run": self.dry_run,
            "only": self.only,
            "targets": list(self.targets) if self.targets is not None else None,
        }


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
    """Score the stored targets of the scorer's scope in the time range (or the ones the request
    names), those with an error or no score when ``request.only`` says so; fills ``progress``."""
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
    if request.targets is not None:
        ids = list(dict.fromkeys(request.targets))
    else:
        ids = await store.target_ids(scope, since=request.since, until=request.until)
    if request.only is not None:
        ids = await _narrow(runner.scores, request.scorer_id, scope, ids, request.only)
    progress.total = len(ids)
    spent_before = runner.budget.spent_usd
    window = max(1, runner.queue_capacity // 2)
    for start in range(0, len(ids), BATCH):
        chunk = ids[start : start + BATCH]
        targets = await _load_targets(store, scope, chunk)
        if len(targets) < len(chunk):  # named targets no longer stored (deleted by retention, say)
            progress.decisions["not_found"] += len(chunk) - len(targets)
            progress.done += len(chunk) - len(targets)
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


async def _narrow(scores: ScoreStore, scorer_id: str, scope: str, ids: list[str], only: str) -> list[str]:
    """The ids whose score of ``scorer_id`` is an error (``only='error'``) or not stored (``missing``)."""
    kind: TargetKind = "run" if scope == "run" else "conversation"
    keep = []
    for start in range(0, len(ids), STATUS_BATCH):
        chunk = ids[start : start + STATUS_BATCH]
        by_score = {target_score_id(scorer_id, kind, i): i for i in chunk}
        statuses = await scores.score_statuses(list(by_score))
        for sid, target in by_score.items():
            status = statuses.get(sid)
            if (status == "error") if only == "error" else status is None:
                keep.append(target)
    return keep


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
