"""Judge outages heal: error scores of a transient judge error are re-scored automatically.

Every ``scoring.heal.check_s`` the :class:`Healer` asks the store for the judge bindings' error
scores that are due (:meth:`~tracescorer.store.api.ScoreStore.heal_candidates`: error class
``transient``, fewer than ``max_attempts`` re-scores, first stored within ``max_age_s``, the
doubling backoff passed by the App's clock). The state is the score rows themselves, so it
survives a restart.

Per binding, one due target goes first as a probe: while the judge is still down it fails again
(its backoff doubles) and the others wait for the next check, so an outage costs one judge request
per binding and check instead of one per error score. Once the probe comes back scored, the rest
of the due targets follow. Re-scores go through the live :class:`~tracescorer.runner.stage.ScoringRunner`
(its queues, judge limits, budgets and caps; nothing is tried while the judge budget or the
binding's is spent) with ``source='heal'``; the score row counts its
re-scores in ``heal_attempts``. Nothing is re-scored while the scoring queues push back on ingest
(live traffic first), and in PostgreSQL mode one daemon of several heals (a store lead).

Which errors are transient, and the backoff: :mod:`tracescorer.runner.heal_policy`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from tracescorer.aio import cancel
from tracescorer.clock import SYSTEM_CLOCK, Clock
from tracescorer.runner.decider import Decision
from tracescorer.runner.heal_policy import HealPolicy
from tracescorer.runner.targets import Target, conversation_target, run_target
from tracescorer.store.api import HealCandidate, Leadership

if TYPE_CHECKING:
    from tracescorer.config import HealSettings
    from tracescorer.metrics import Metrics
    from tracescorer.runner.bindings import BoundScorer
    from tracescorer.runner.stage import ScoringRunner

log = logging.getLogger(__name__)

SOURCE = "heal"
_HEALED = (Decision.SCORED, Decision.NOT_SCORABLE)


class Healer:
    """Re-scores transient judge errors (see the module docstring); runs on the daemon's loop.
    ``clock``'s wall time is what the backoff and ``max_age_s`` are measured against."""

    def __init__(
        self,
        runner: ScoringRunner,
        settings: HealSettings,
        metrics: Metrics,
        *,
        leadership: Leadership | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._runner = runner
        self._clock = clock
        self._settings = settings
        self._metrics = metrics
        self._leadership = leadership
        self._leading = False
        self._inflight: set[str] = set()  # score ids queued for a re-score
        # score ids whose re-score was committed while a check's read ran: that read may have
        # seen the old row (a read and a commit run side by side in the store)
        self._released: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    @property
    def bindings(self) -> list[BoundScorer]:
        """The bindings whose errors heal: those that call the judge."""
        return [b for b in self._runner.bindings if b.uses_judge]

    async def start(self) -> None:
        s = self._settings
        if s.enabled and s.max_attempts > 0 and self.bindings:
            self._task = asyncio.create_task(self._loop(), name="judge-heal")

    async def stop(self, deadline: float) -> bool:
        """Stop checking; re-scores already queued finish (or are abandoned) with the runner."""
        await cancel([self._task])
        self._task = None
        if self._leading and self._leadership is not None:
            self._leading = False
            await self._leadership.release()
        return True

    async def _loop(self) -> None:
        while True:
            try:
                await self.heal_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # the next check tries again; a store hiccup must not end healing
                log.exception("judge heal check failed")
            await asyncio.sleep(self._settings.check_s)

    async def heal_once(self) -> int:
        """One check: re-score the due error scores (a probe per binding first); returns how many
        re-scores were queued."""
        if self._runner.backlog() is not None or self._runner.budget.exhausted:
            return 0  # live traffic first; a spent budget would only turn each check into a refusal
        if self._leadership is not None:
            lead = self._leadership
            self._leading = await (lead.held() if self._leading else lead.try_acquire())
            if not self._leading:
                return 0
        policy = HealPolicy.of(self._settings)
        bindings = {b.binding.id: b for b in self.bindings}
        limit = max(1, min(self._settings.max_batch, self._runner.queue_capacity // 4))
        self._released.clear()  # released before this read: it sees their new rows
        due = await self._runner.scores.heal_candidates(
            list(bindings), policy, now=self._clock.time(), limit=limit + len(self._inflight)
        )
        skip = self._inflight | self._released
        by_binding: dict[str, list[HealCandidate]] = {}
        for candidate in due:
            if candidate.score_id not in skip and candidate.scorer_id in bindings:
                by_binding.setdefault(candidate.scorer_id, []).append(candidate)
        queued = 0
        for scorer_id, candidates in by_binding.items():
            if self._runner.caps.budget_refusal(scorer_id) is not None:
                continue  # this binding's own daily budget is spent
            queued += await self._heal_binding(bindings[scorer_id], candidates[:limit])
        return queued

    async def _heal_binding(self, bound: BoundScorer, candidates: list[HealCandidate]) -> int:
        queued, probed = 0, False
        for candidate in candidates:
            decided = await self._submit(bound, candidate)
            if decided is None:
                continue
            queued += 1
            if not probed:  # the probe: the others only follow once the judge answers again
                probed = True
                outcome = await decided
                if outcome not in _HEALED:  # DEBUG: a line per check during an outage would flood the log
                    log.debug("judge heal: %s still failing (%s); retrying later", bound.binding.id, outcome)
                    return queued
                log.info(
                    "judge heal: %s answers again; re-scoring %d more error score(s)",
                    bound.binding.id,
                    len(candidates) - 1,
                )
        return queued

    async def _submit(self, bound: BoundScorer, candidate: HealCandidate) -> asyncio.Future[Decision] | None:
        target = await self._load(candidate)
        if target is None:  # deleted by retention since
            log.debug("judge heal: %s %s is no longer stored", candidate.target_type, candidate.target_id)
            return None
        attempt = candidate.heal_attempts + 1
        decided = self._runner.decide(bound, target, SOURCE, heal_attempt=attempt)
        if not isinstance(decided, asyncio.Future):  # refused at once (budget, queue full): not an attempt
            return None
        self._metrics.judge_heal.labels("retried").inc()
        self._inflight.add(candidate.score_id)
        decided.add_done_callback(self._finished(candidate.score_id, attempt))
        return decided

    def _finished(self, score_id: str, attempt: int) -> Callable[[asyncio.Future[Decision]], None]:
        def done(future: asyncio.Future[Decision]) -> None:
            # in flight until its row is stored: a check before the commit would find the old row due
            self._runner.writer.committed().add_done_callback(lambda _: self._release(score_id))
            if future.cancelled() or future.exception() is not None:
                return
            outcome = future.result()
            if outcome in _HEALED:
                self._metrics.judge_heal.labels("healed").inc()
            elif outcome is Decision.FAILED and attempt >= self._settings.max_attempts:
                self._metrics.judge_heal.labels("gave_up").inc()
                log.warning("judge heal: score %s gave up after %d automatic re-scores", score_id, attempt)

        return done

    def _release(self, score_id: str) -> None:
        self._inflight.discard(score_id)
        self._released.add(score_id)

    async def _load(self, candidate: HealCandidate) -> Target | None:
        runs = self._runner.runs
        if candidate.target_type == "conversation":
            conversation = await runs.load_conversation(candidate.target_id)
            return conversation_target(conversation) if conversation is not None else None
        found = await runs.load_runs([candidate.target_id])
        return run_target(found[0]) if found else None
