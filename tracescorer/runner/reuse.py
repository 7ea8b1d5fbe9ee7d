"""The runner's part in a judge-using scorer run (:class:`RunnerSession`): verdict reuse through the
store, and the limits a run is admitted by at its first request that goes to a model.

A verdict is reused for the same request (:func:`tracescorer.scorers.reuse.request_key`: what is
sent, exactly) under the same scorer version within ``judge.reuse_max_age_s``, unless the binding
says ``reuse: false``. A reused request costs nothing: no call, no tokens, no cost, no rate-limit
tokens, no budget. A run all of whose requests are answered so is never admitted; one that needs
the model is admitted once, before its first request (budget, per-binding caps, requests per
minute: the same checks as before scoring, moved to where they are known to be needed). The
verdicts the model gave are stored after the run (:meth:`RunnerSession.keep`), in the store's
``judge_verdicts`` table: daemons sharing a store, worker processes and a restarted daemon all
find them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from tracescorer.records.scores import VerdictRecord
from tracescorer.runner.bindings import BoundScorer
from tracescorer.runner.caps import BindingCaps
from tracescorer.runner.decider import Decision
from tracescorer.runner.limits import DailyBudget, Limiter
from tracescorer.runner.targets import Target, score_id
from tracescorer.scorers.reuse import Verdict
from tracescorer.store.api import ScoreStore

log = logging.getLogger(__name__)


class Refused(Exception):
    """The run may not ask the judge now: ``decision`` (budget_exhausted, rate_limited) and why."""

    def __init__(self, decision: Decision, detail: str) -> None:
        super().__init__(detail)
        self.decision = decision
        self.detail = detail


async def admit(bound: BoundScorer, budget: DailyBudget, caps: BindingCaps, rate: Limiter) -> None:
    """Admit a judge run at its first request to a model: the daily budget, the binding's caps,
    then the requests per minute (waited for); raises :class:`Refused`."""
    if budget.exhausted:
        raise Refused(Decision.BUDGET_EXHAUSTED, budget.detail())
    cap = caps.budget_refusal(bound.binding.id)
    if cap is not None:
        raise Refused(Decision.BUDGET_EXHAUSTED, cap)
    cap = await caps.take(bound)
    if cap is not None:
        raise Refused(Decision.RATE_LIMITED, cap)
    await rate.acquire(max(1, bound.judge_requests))


class RunnerSession:
    """One scorer run's :class:`~tracescorer.scorers.reuse.JudgeSession` (on the event loop).

    ``admit`` is the runner's admission of the run (it raises :class:`Refused`); ``max_age_s`` 0
    turns reuse off (lookups and verdicts kept alike).
    """

    def __init__(
        self,
        scores: ScoreStore,
        bound: BoundScorer,
        score_id: str,
        max_age_s: float,
        admit: Callable[[], Awaitable[None]],
    ) -> None:
        self._scores = scores
        self._scorer_id = bound.binding.id
        self._version = bound.version
        self._score_id = score_id
        self._max_age_s = max_age_s if bound.version else 0.0  # no version: nothing to tell verdicts apart by
        self._admit = admit
        self.admitted = False
        self.verdicts: list[VerdictRecord] = []

    async def stored(self, key: str) -> Verdict | None:
        if self._max_age_s <= 0:
            return None
        try:
            found = await self._scores.find_verdict(key, self._version, max_age_s=self._max_age_s)
        except Exception as exc:  # noqa: BLE001 - a failed lookup is a miss: the judge is asked
            log.debug("verdict lookup failed: %s", exc)
            return None
        return Verdict(text=found.raw_output, origin=found.score_id or "") if found is not None else None

    async def admit(self) -> None:
        if not self.admitted:
            await self._admit()  # raises Refused: nothing asked yet, nothing spent
            self.admitted = True

    def judged(self, key: str, model: str, text: str) -> None:
        if self._max_age_s > 0:
            self.verdicts.append(
                VerdictRecord(
                    input_hash=key,
                    scorer_version=self._version,
                    scorer_id=self._scorer_id,
                    model=model,
                    raw_output=text,
                    score_id=self._score_id,
                )
            )

    async def keep(self) -> None:
        """Store the verdicts the model gave in this run (a failed write only costs reuse)."""
        if not self.verdicts:
            return
        try:
            await self._scores.write_verdicts(self.verdicts, max_age_s=self._max_age_s)
        except Exception as exc:  # noqa: BLE001 - reuse is a saving, never a reason for a score to fail
            log.debug("judge verdicts not kept for reuse (%s): the same requests are judged again", exc)


class JudgeSide:
    """The runner's judge side (on the event loop): the judge's set-up, a :class:`RunnerSession` per
    judge run, and the verdicts being stored aside (the judge workers do not wait for them)."""

    def __init__(self, scores: ScoreStore, reuse_max_age_s: float) -> None:
        self._scores = scores
        self._max_age_s = reuse_max_age_s
        self._ready: asyncio.Future[None] | None = None
        self._keeping: set[asyncio.Task[None]] = set()

    def set_up(self) -> asyncio.Future[None]:
        """litellm's import and warm-up take seconds: once, in a worker thread; judge calls wait for it."""
        if self._ready is None:
            from tracescorer.scorers import judge

            self._ready = asyncio.ensure_future(asyncio.to_thread(judge.preload))
            self._ready.add_done_callback(_told_if_failed)
        return self._ready

    def session(self, bound: BoundScorer, target: Target, admit: Callable[[], Awaitable[None]]) -> RunnerSession:
        """The session of one run of ``bound`` on ``target`` (reuse off for a ``reuse: false`` binding)."""
        age = self._max_age_s if bound.binding.reuse else 0.0
        return RunnerSession(self._scores, bound, score_id(bound.binding.id, target), age, admit)

    def keep(self, session: RunnerSession) -> None:
        """Store the run's new verdicts in a task of their own."""
        if session.verdicts:
            task = asyncio.create_task(session.keep(), name="keep-verdicts")
            self._keeping.add(task)
            task.add_done_callback(self._keeping.discard)

    async def drain(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the verdicts being stored (at shutdown)."""
        if self._keeping:
            await asyncio.wait(self._keeping, timeout=timeout_s)


def _told_if_failed(ready: asyncio.Future[None]) -> None:
    if not ready.cancelled() and ready.exception() is not None:
        log.error("the judge cannot be set up (its judge calls fail): %s", ready.exception())
