"""Online scoring: bound scorers decide, queue and run on live runs and idle conversations.

For every (binding, target) one decision is recorded in ``scoring_decisions``: ``filtered_out``
(which clause), ``sampled_out``, ``budget_exhausted``, ``rate_limited`` (queue full, a cap),
``gated`` (its gate's score did not call for it, :mod:`~tracescorer.runner.gates`), or after
the scorer ran ``scored``, ``not_scorable`` or ``failed`` — with the score row (errors included,
a failure outside the scorer too) in ``scores``. Nothing is skipped silently. A judge run is
admitted to the judge limits at its first request to a model; earlier verdicts answer the others
(:mod:`~tracescorer.runner.reuse`).

The parts: :func:`~tracescorer.runner.decider.decide` (pure: filter → sample → budget), two
:class:`~tracescorer.runner.pool.WorkerPool` s (judge-using scorers share ``judge.max_concurrency``
workers, a requests-per-minute limiter and the daily budget; code scorers have their own workers
and keep running when the judge budget is spent or the judge is down), the pure record mapping of
:mod:`~tracescorer.runner.records`, and a :class:`~tracescorer.runner.writer.ScoreWriter`.
When conversations go idle is assembly's business (:mod:`tracescorer.assembly.idle`); it calls
:meth:`ScoringRunner.conversation_idle`.

Shutdown is bounded: queued work drains until the deadline, then running scorers (a judge call
that hangs) are cancelled. A cancelled target gets no decision row, so the next start's recovery
scores it; nothing is stored twice (score ids are deterministic).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tracescorer.aio import cancel
from tracescorer.clock import SYSTEM_CLOCK, Clock
from tracescorer.config import Settings
from tracescorer.lifecycle import seconds_left
from tracescorer.metrics import Metrics
from tracescorer.model import AgentRun
from tracescorer.records.scores import ScoreRecord
from tracescorer.runner.batches import Batcher
from tracescorer.runner.bindings import BoundScorer, scoped
from tracescorer.runner.caps import BindingCaps, sync_shared_spend
from tracescorer.runner.decider import Decision, decide, outcome
from tracescorer.runner.gates import dependents, first_deciders, gate_refusal, stored_refusal
from tracescorer.runner.limits import DailyBudget, Limiter, RateLimiter
from tracescorer.runner.pool import WorkerPool
from tracescorer.runner.records import decision_detail, decision_record, failure_record, score_record
from tracescorer.runner.recovery import RecoveryScope, list_unscored, score_recovered
from tracescorer.runner.reuse import JudgeSide, Refused, RunnerSession, admit
from tracescorer.runner.targets import Target, conversation_target, run_target
from tracescorer.runner.writer import ScoreListener, ScoreWriter
from tracescorer.scorers.errors import ScorerRunError
from tracescorer.scorers.reuse import SESSION
from tracescorer.slotted import stored_through_slots
from tracescorer.store.api import RunStore, ScoreStore

log = logging.getLogger(__name__)

BUDGET_SYNC_S = 2.0
WRITE_RESERVE_S = 0.25  # of a shutdown's time: kept for storing what finished
# time.thread_time() is a system call (0.5-2 µs, a quarter of a code score's time when read twice
# per score): one code score in CPU_SAMPLE, picked at random, is timed and counted that many times
CPU_SAMPLE = 8

__all__ = ["Decision", "ScoreListener", "ScoringRunner"]


@stored_through_slots
@dataclass(frozen=True, slots=True, kw_only=True)
class _Task:
    bound: BoundScorer
    target: Target
    source: str
    done: asyncio.Future[Decision]
    heal_attempt: int = 0
    gate_passed: bool = False  # a gated binding queued on its gate's score: no store read


class ScoringRunner:
    """Decides, queues and runs the bound scorers; runs on the daemon's event loop."""

    def __init__(
        self,
        bound: Sequence[BoundScorer],
        runs: RunStore,
        scores: ScoreStore,
        metrics: Metrics,
        settings: Settings,
        *,
        listeners: Sequence[ScoreListener] = (),
        rate: Limiter | None = None,
        shared_budget: bool = False,
        caps: BindingCaps | None = None,
        recovery: RecoveryScope | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.caps = caps or BindingCaps(bound)  # per-binding caps (scorers[].limits)
        self.rebind(bound)
        self._recovery = recovery or RecoveryScope()  # what this runner recovers at start
        self._runs = runs
        self._scores = scores
        self._metrics = metrics
        self._settings = settings
        judge, scoring = settings.judge, settings.scoring
        self.rate: Limiter = rate or RateLimiter(judge.requests_per_minute)
        self.budget = DailyBudget(judge.daily_budget_usd)
        self._shared_budget = shared_budget
        self.writer = ScoreWriter(scores, listeners, metrics=metrics, clock=clock)
        self._judge = WorkerPool(
            "judge", workers=judge.max_concurrency, max_queue=scoring.max_queue, handle=self._run_task
        )
        self._code = WorkerPool("code", workers=scoring.workers, max_queue=scoring.max_queue, handle=self._run_task)
        self.batches = Batcher(scores, judge, self._run_task, max_queue=scoring.max_queue, clock=clock)  # mode: batch
        self._tasks: list[asyncio.Task[None]] = []
        self.judging = JudgeSide(scores, judge.reuse_max_age_s)
        self._accepting = False

    def rebind(self, bound: Sequence[BoundScorer]) -> None:
        """Decide with ``bound`` from now on (a reload); tasks queued or running keep their binding."""
        self._bound, self._gated, self._conv_bindings = list(bound), dependents(bound), scoped(bound, "conversation")
        self._run_first = first_deciders(scoped(bound, "run"))
        self.caps.rebind(bound)

    def add_score_listener(self, listener: ScoreListener) -> None:
        """Also tell ``listener`` about every committed batch of score rows."""
        self.writer.listeners.append(listener)

    @property
    def runs(self) -> RunStore:
        """Where the targets come from (backfills load theirs through it)."""
        return self._runs

    @property
    def scores(self) -> ScoreStore:
        """Where the score rows go (backfills of errors or missing scores read their statuses)."""
        return self._scores

    @property
    def bindings(self) -> list[BoundScorer]:
        return list(self._bound)

    @property
    def conversation_bindings(self) -> list[BoundScorer]:
        return list(self._conv_bindings)

    @property
    def queue_capacity(self) -> int:
        return self._settings.scoring.max_queue

    def binding(self, scorer_id: str) -> BoundScorer | None:
        return next((b for b in self._bound if b.binding.id == scorer_id), None)

    def backlog(self) -> str | None:
        """Backlog check for the segment log's feed: hold it back while half a scoring queue is
        taken, so runs already on their way still find room (and are not recorded as rate_limited)."""
        for pool in (self._judge, self._code):
            if pool.qsize() * 2 >= pool.maxsize:
                return f"{pool.qsize()} targets waiting for {pool.name} scorers (scoring.max_queue)"
        if self.writer.waiting >= 20 * self._settings.scoring.max_queue:
            return f"{self.writer.waiting} score rows waiting for the store"
        return None

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the workers, the writer and recovery of recent targets left without a decision."""
        if self._recovery.runs and any(b.uses_judge for b in self._bound):
            self.judging.set_up()  # it judges runs soon; beside worker processes: at its first judge call
        await self.start_workers()
        if self._bound:  # listed now, before assembly starts: what this start stores is scored live
            found = await list_unscored(self, self._settings.scoring.recover_window_s, self._recovery)
            self._tasks.append(asyncio.create_task(score_recovered(self, found), name="scoring-recovery"))
        if self._shared_budget and (self._settings.judge.daily_budget_usd is not None or self.caps.budgeted):
            sync = sync_shared_spend(
                self.budget, self.caps, self._scores, lambda: self.writer.uncommitted_cost_usd, BUDGET_SYNC_S
            )
            self._tasks.append(asyncio.create_task(sync, name="budget-sync"))

    async def start_workers(self) -> None:
        """Only the workers and the writer (a one-off backfill needs no recovery)."""
        spent = await self._scores.spent_today_usd()
        self.budget = DailyBudget(self._settings.judge.daily_budget_usd, spent_today_usd=spent)
        if self.caps.budgeted:
            self.caps.sync(await self._scores.spent_today_by_scorer(self.caps.budgeted))
        await self.batches.start()
        self.writer.start()
        self._judge.start()
        self._code.start()
        self._accepting = True
        self._metrics.scoring_queue.labels("judge").set_function(self._judge.qsize)
        self._metrics.scoring_queue.labels("code").set_function(self._code.qsize)

    async def stop(self, deadline: float) -> bool:
        """Stop intake, let queued work finish until ``deadline`` (monotonic seconds; at most
        ``scoring.shutdown_timeout_s`` from now), cancel what still runs, store what finished. True when
        nothing was abandoned; abandoned targets (batch-mode waits at once) get no decision row: the next
        start's recovery scores them (within ``scoring.recover_window_s``)."""
        self._accepting = False
        timeout_s = min(self._settings.scoring.shutdown_timeout_s, seconds_left(deadline))
        deadline = time.monotonic() + timeout_s
        await cancel(self._tasks)
        self._tasks = []
        abandoned = int(not await self.batches.stop(deadline))  # batch waits: recovered after the next start
        drain_s = max(0.0, timeout_s * (1 - WRITE_RESERVE_S))
        for pool, left in zip(
            (self._judge, self._code),
            await asyncio.gather(self._judge.shutdown(drain_s), self._code.shutdown(drain_s)),
            strict=False,
        ):
            for item in left:
                if not item.done.done():
                    item.done.cancel()
            if left:
                self._metrics.scoring_abandoned.labels(pool.name).inc(len(left))
            abandoned += len(left)
        await self.judging.drain(max(0.1, deadline - time.monotonic()))
        stored = await self.writer.close(max(0.1, deadline - time.monotonic()))
        if abandoned:
            log.warning("scoring stopped with work abandoned: those targets are scored after the next start")
        return stored and not abandoned

    # --- intake ---------------------------------------------------------------------------------

    def on_runs(self, runs: Sequence[AgentRun]) -> None:
        """RunListener: decide the run-scope bindings for stored runs."""
        if not self._accepting:
            return
        for run in runs:
            target = run_target(run)
            for bound in self._run_first:
                self.decide(bound, target, "live")

    def decide(
        self,
        bound: BoundScorer,
        target: Target,
        source: str,
        extra_check: Callable[[Target], str | None] | None = None,
        heal_attempt: int = 0,
        gate: tuple[str, float | None] | None = None,
    ) -> Decision | asyncio.Future[Decision]:
        """Record why ``target`` is not scored (returns that decision), or queue it (returns a
        future of the decision it gets once the scorer ran); ``heal_attempt`` numbers an
        automatic re-score of an error score (:mod:`tracescorer.runner.heal`); ``gate``: the
        decision and score of a gated binding's gate (:mod:`tracescorer.runner.gates`)."""
        exhausted = bound.uses_judge and self.budget.exhausted
        cap = None if exhausted else self.caps.budget_refusal(bound.binding.id)
        verdict = decide(
            bound,
            target,
            budget_exhausted=exhausted or cap is not None,
            budget_detail=self.budget.detail() if exhausted else cap or "",
            extra_check=extra_check,
        )
        when = bound.binding.when
        gated = gate_refusal(when, *gate) if verdict.decision is Decision.RUN and when and gate else None
        if verdict.decision is not Decision.RUN or gated:
            decision, detail = (Decision.GATED, gated) if gated else (verdict.decision, verdict.detail)
            self._record(bound, target, decision, detail, source)
            return decision
        done: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        pool = self.batches.pool_of(bound) or (self._judge if bound.uses_judge else self._code)
        # live runs come from the segment log's feed, which waits while half a queue is taken
        # (backlog()): the runs of traces already in assembly may pass the limit rather than be
        # dropped; their number is bounded by assembly's own limits
        if not pool.submit(
            _Task(
                bound=bound, target=target, source=source, done=done, heal_attempt=heal_attempt, gate_passed=bool(gate)
            ),
            past_limit=source == "live",
        ):
            detail = f"scoring queue full ({pool.maxsize} waiting)" if pool.accepting else "shutting down"
            self._record(bound, target, Decision.RATE_LIMITED, detail, source)
            return Decision.RATE_LIMITED
        return done

    def _record(
        self,
        bound: BoundScorer,
        target: Target,
        decision: Decision,
        detail: str | None,
        source: str,
        score: ScoreRecord | None = None,
    ) -> None:
        self._metrics.child(self._metrics.decisions, bound.binding.id, decision.value).inc()
        self.writer.add(decision_record(bound, target, decision, detail, source, score.id if score else None), score)
        for gated in self._gated.get(bound.binding.id, ()):  # decided on this decision (scorers[].when)
            self.decide(gated, target, source, gate=(decision.value, score.score if score else None))

    # --- execution ------------------------------------------------------------------------------

    async def _run_task(self, task: _Task) -> None:
        try:
            decision = await self.execute(task.bound, task.target, task.source, task.heal_attempt, task.gate_passed)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a worker must survive anything a task does
            log.exception("scoring %s failed unexpectedly", task.bound.binding.id)
            decision = self._failed(task, exc)
        if not task.done.done():
            task.done.set_result(decision)

    def _failed(self, task: _Task, error: Exception) -> Decision:
        """A failure outside the scorer leaves an error row the healer re-scores, and ``failed``."""
        try:
            row = failure_record(task.bound, task.target, task.source, error, task.heal_attempt)
            self._record(task.bound, task.target, Decision.FAILED, row.error, task.source, row)
        except Exception:  # nothing to store: recovery after a restart finds the target undecided
            log.exception("recording the failure of %s failed too", task.bound.binding.id)
        return Decision.FAILED

    async def execute(
        self, bound: BoundScorer, target: Target, source: str, heal_attempt: int = 0, gate_passed: bool = False
    ) -> Decision:
        """Run one scorer on one target (its gate and limits applied), store the score; returns the decision."""
        gated = await stored_refusal(self._scores, bound, target) if bound.binding.when and not gate_passed else None
        if gated is not None:
            self._record(bound, target, Decision.GATED, gated, source)
            return Decision.GATED
        session: RunnerSession | None = None
        if bound.uses_judge:
            await asyncio.shield(self.judging.set_up())
            session = self.judging.session(bound, target, lambda: admit(bound, self.budget, self.caps, self.rate))
        started = time.perf_counter()
        timed = not bound.uses_judge and random.random() * CPU_SAMPLE < 1.0
        cpu = time.thread_time() if timed else 0.0
        error: BaseException | None = None
        context = SESSION.set(session)
        try:
            result = await bound.scorer.run(target.subject)
        except ScorerRunError as exc:
            if isinstance(exc.__cause__, Refused):  # admission refused before anything was asked
                self._record(bound, target, exc.__cause__.decision, exc.__cause__.detail, source)
                return exc.__cause__.decision
            result, error = exc.result, exc
        except asyncio.CancelledError:
            raise  # shutdown: no row, recovery scores it again
        except Exception as exc:  # noqa: BLE001 - user scorer code: an error row, never a crash
            result, error = None, exc
        finally:
            SESSION.reset(context)
        if timed:  # a code scorer runs without yielding: its thread time is its own
            self._metrics.child(self._metrics.stage_cpu, "scoring").inc((time.thread_time() - cpu) * CPU_SAMPLE)
        if session is not None:
            self.judging.keep(session)
        record = score_record(bound, target, source, result, error, time.perf_counter() - started, heal_attempt)
        self.budget.add(record.judge_cost_usd)
        self.caps.add(bound.binding.id, record.judge_cost_usd)
        if result is not None:
            self._metrics.observe_judge_calls(result.judge_calls)
        decision = outcome(record.status)
        self._record(bound, target, decision, decision_detail(record), source, record)  # last: no raise after it
        return decision

    async def flush(self) -> None:
        """Write every pending score and decision now and wait for the commit."""
        await self.writer.flush()

    # --- conversations and recovery ----------------------------------------------------------

    async def score_conversation(
        self,
        conversation_id: str,
        source: str,
        extra_check: Callable[[Target], str | None] | None = None,
        bindings: Sequence[BoundScorer] | None = None,
        activity_seq: int | None = None,
    ) -> list[Decision | asyncio.Future[Decision]] | None:
        """Decide every conversation-scope binding for the stored conversation (all its runs; its
        score rows name ``activity_seq``, that of a claim); None when scoring stopped while it
        loaded: nothing decided (deciding now would store "rate_limited: shutting down" as its
        decision, and it would not be scored again)."""
        conversation = await self._runs.load_conversation(conversation_id)
        if not self._accepting:
            return None
        if conversation is None:
            return []
        target = conversation_target(conversation, activity_seq)
        return [
            self.decide(bound, target, source, extra_check)
            for bound in first_deciders(bindings if bindings is not None else self._conv_bindings)
        ]

    async def conversation_idle(self, conversation_id: str, activity_seq: int | None = None) -> bool:
        """ConversationSink: score a conversation that went idle (claimed at ``activity_seq``);
        True once every binding's decision is stored, False when abandoned (shutting down)."""
        if not self._accepting:
            return False
        decided = await self.score_conversation(conversation_id, "live", activity_seq=activity_seq)
        if decided is None:
            return False  # its claim is released: due again at once
        pending = [d for d in decided if isinstance(d, asyncio.Future)]
        if pending:
            results = await asyncio.gather(*pending, return_exceptions=True)
            if any(isinstance(r, BaseException) for r in results):
                return False
        await self.writer.committed()
        return True
