"""Online scoring: bound scorers decide, queue and run on live runs and idle conversations.

For every (binding, target) one decision is recorded in ``scoring_decisions``: ``filtered_out``
(which clause), ``sampled_out``, ``budget_exhausted``, ``rate_limited`` (queue full), or after
the scorer ran ``scored``, ``not_scorable`` or ``failed`` — with the score row (errors included)
in ``scores``. Nothing is skipped silently. Judge-using scorers share a concurrency limit, a
requests-per-minute bucket and a daily USD budget; code scorers have their own workers and keep
running when the judge budget is spent or the judge is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tracescorer.assembly.conversations import ConversationTracker
from tracescorer.config import Settings
from tracescorer.metrics import Metrics
from tracescorer.model import AgentRun, Conversation
from tracescorer.sampling import is_sampled, sample_value
from tracescorer.scoring.bindings import BoundScorer
from tracescorer.scorers.errors import ScorerRunError
from tracescorer.scoring.limits import DailyBudget, RateLimiter
from tracescorer.scoring.targets import Target, conversation_target, decision_id, run_target, score_id
from tracescorer.scorers.types import ScorerResult
from tracescorer.store.base import Store
from tracescorer.store.records import DecisionRecord, ScoreRecord

log = logging.getLogger(__name__)

SCORED, SAMPLED_OUT, FILTERED_OUT = "scored", "sampled_out", "filtered_out"
NOT_SCORABLE, RATE_LIMITED, BUDGET_EXHAUSTED, FAILED = "not_scorable", "rate_limited", "budget_exhausted", "failed"


class ScoreListener(Protocol):
    """Told about score rows after they were committed (on the event loop; must not block or raise)."""

    def on_scores(self, scores: Sequence[ScoreRecord]) -> None: ...


@dataclass(frozen=True, slots=True)
class _Task:
    bound: BoundScorer
    target: Target
    source: str
    done: asyncio.Future[str] | None = None


class ScoringRunner:
    """Owns the scoring queues and workers; runs on the daemon's event loop."""

    def __init__(self, bound: Sequence[BoundScorer], store: Store, metrics: Metrics, settings: Settings,
                 *, listeners: Sequence[ScoreListener] = ()) -> None:
        self._bound = list(bound)
        self._run_bindings = [b for b in bound if b.binding.scope == "run"]
        self._conv_bindings = [b for b in bound if b.binding.scope == "conversation"]
        self._store = store
        self._metrics = metrics
        self._settings = settings
        self._score_listeners = list(listeners)
        judge, scoring = settings.judge, settings.scoring
        self._judge_queue: asyncio.Queue[_Task] = asyncio.Queue(scoring.max_queue)
        self._code_queue: asyncio.Queue[_Task] = asyncio.Queue(scoring.max_queue)
        self._judge_workers = judge.max_concurrency
        self._code_workers = scoring.workers
        self.rate = RateLimiter(judge.requests_per_minute)
        self.budget = DailyBudget(judge.daily_budget_usd)
        self.tracker = ConversationTracker(conversation_idle_s=settings.assembly.conversation_idle_s)
        self._decisions: list[DecisionRecord] = []
        self._scores: list[ScoreRecord] = []
        self._dirty = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._accepting = False

    def add_score_listener(self, listener: ScoreListener) -> None:
        """Also tell ``listener`` about every committed batch of score rows."""
        self._score_listeners.append(listener)

    @property
    def store(self) -> Store:
        return self._store

    def backlog(self) -> str | None:
        """Backlog check for admission: refuse telemetry while half a scoring queue is taken, so
        runs already on their way still find room (and are not recorded as rate_limited)."""
        for pool, queue in (("judge", self._judge_queue), ("code", self._code_queue)):
            if queue.qsize() * 2 >= queue.maxsize:
                return f"{queue.qsize()} targets waiting for {pool} scorers (scoring.max_queue)"
        waiting = len(self._scores) + len(self._decisions)
        if waiting >= 20 * self._settings.scoring.max_queue:
            return f"{waiting} score rows waiting for the store"
        return None

    def binding(self, scorer_id: str) -> BoundScorer | None:
        return next((b for b in self._bound if b.binding.id == scorer_id), None)

    @property
    def queue_capacity(self) -> int:
        return self._settings.scoring.max_queue

    @property
    def bindings(self) -> list[BoundScorer]:
        return list(self._bound)

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start workers, the conversation timer and recovery of unscored recent runs."""
        await self.start_workers()
        self._tasks.append(asyncio.create_task(self._tick(), name="scoring-tick"))
        if self._bound:
            self._tasks.append(asyncio.create_task(self._recover(), name="scoring-recovery"))

    async def start_workers(self) -> None:
        """Only the workers (a one-off backfill needs no timer or recovery)."""
        self.budget = DailyBudget(self._settings.judge.daily_budget_usd,
                                  spent_today_usd=await self._store.spent_today_usd())
        self._accepting = True
        for i in range(self._judge_workers):
            self._tasks.append(asyncio.create_task(self._worker(self._judge_queue), name=f"judge-worker-{i}"))
        for i in range(self._code_workers):
            self._tasks.append(asyncio.create_task(self._worker(self._code_queue), name=f"code-worker-{i}"))
        self._tasks.append(asyncio.create_task(self._writer(), name="score-writer"))
        self._metrics.scoring_queue.labels("judge").set_function(self._judge_queue.qsize)
        self._metrics.scoring_queue.labels("code").set_function(self._code_queue.qsize)

    async def stop(self, timeout_s: float) -> None:
        """Stop intake, let queued work finish until the deadline, record what was decided.

        Targets still queued at the deadline get no decision row, so the next start's recovery
        scores them (within ``scoring.recover_window_s``).
        """
        self._accepting = False
        deadline = time.monotonic() + timeout_s
        for queue in (self._judge_queue, self._code_queue):
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(queue.join(), max(0.0, deadline - time.monotonic()))
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._flush_decisions()

    # --- intake ---------------------------------------------------------------------------------

    def on_runs(self, runs: Sequence[AgentRun]) -> None:
        """RunListener: decide run-scope bindings now, track conversations for later."""
        if not self._accepting:
            return
        for run in runs:
            target = run_target(run)
            for bound in self._run_bindings:
                self.decide(bound, target, "live")
        if self._conv_bindings:
            self.tracker.touch(r.conversation_id for r in runs if r.conversation_id)
            self._metrics.conversations_tracked.set(len(self.tracker))

    def decide(self, bound: BoundScorer, target: Target, source: str,
               extra_check: Callable[[Target], str | None] | None = None) -> str | asyncio.Future[str]:
        """Record why ``target`` is not scored (returns that decision), or queue it (returns a
        future of the decision it gets once the scorer ran)."""
        binding = bound.binding
        ratio = binding.sampling.ratio
        failed_clause = binding.filter.check(target.subject) or (extra_check(target) if extra_check else None)
        if failed_clause is not None:
            self._record(bound, target, FILTERED_OUT, failed_clause, source)
            return FILTERED_OUT
        if not is_sampled(target.sample_key, ratio):
            self._record(bound, target, SAMPLED_OUT,
                         f"sample value {sample_value(target.sample_key):.4f} >= ratio {ratio:g}", source)
            return SAMPLED_OUT
        if bound.uses_judge and self.budget.exhausted:
            self._record(bound, target, BUDGET_EXHAUSTED, self._budget_detail(), source)
            return BUDGET_EXHAUSTED
        done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        queue = self._judge_queue if bound.uses_judge else self._code_queue
        try:
            queue.put_nowait(_Task(bound, target, source, done))
        except asyncio.QueueFull:
            self._record(bound, target, RATE_LIMITED, f"scoring queue full ({queue.maxsize} waiting)", source)
            return RATE_LIMITED
        return done

    def _budget_detail(self) -> str:
        return f"daily judge budget spent: ${self.budget.spent_usd:.4f} of ${self.budget.limit_usd:g}"

    def _record(self, bound: BoundScorer, target: Target, decision: str, detail: str | None, source: str,
                score_row_id: str | None = None) -> None:
        self._metrics.decisions.labels(bound.binding.id, decision).inc()
        self._dirty.set()
        self._decisions.append(DecisionRecord(
            id=decision_id(bound.binding.id, target), scorer_id=bound.binding.id, target_type=target.kind,
            target_id=target.id, trace_id=target.trace_id, conversation_id=target.conversation_id,
            decision=decision, detail=detail, sample_rate=bound.binding.sampling.ratio, source=source,
            score_id=score_row_id))

    # --- execution ------------------------------------------------------------------------------

    async def _worker(self, queue: asyncio.Queue[_Task]) -> None:
        while True:
            task = await queue.get()
            try:
                decision = await self.execute(task.bound, task.target, task.source)
            except Exception:  # noqa: BLE001 - a worker must survive anything a task does
                log.exception("scoring %s failed unexpectedly", task.bound.binding.id)
                decision = FAILED
            finally:
                queue.task_done()
            if task.done is not None and not task.done.done():
                task.done.set_result(decision)

    async def execute(self, bound: BoundScorer, target: Target, source: str) -> str:
        """Run one scorer on one target (limits applied), store the score; returns the decision."""
        if bound.uses_judge:
            if self.budget.exhausted:
                self._record(bound, target, BUDGET_EXHAUSTED, self._budget_detail(), source)
                return BUDGET_EXHAUSTED
            await self.rate.acquire(max(1, bound.judge_requests))
        started = time.perf_counter()
        cpu = time.thread_time()
        error: BaseException | None = None
        try:
            result = await bound.scorer.run(target.subject)
        except ScorerRunError as exc:
            result, error = exc.result, exc
        except Exception as exc:  # noqa: BLE001 - user scorer code: an error row, never a crash
            result, error = None, exc
        if not bound.uses_judge:  # a code scorer runs without yielding: its thread time is its own
            self._metrics.stage_cpu.labels("scoring").inc(time.thread_time() - cpu)
        record = self._score_record(bound, target, source, result, error, time.perf_counter() - started)
        self.budget.add(record.judge_cost_usd)
        decision = {"ok": SCORED, "not_scorable": NOT_SCORABLE}.get(record.status, FAILED)
        detail = record.error if record.status == "error" else (record.reason if record.status == "not_scorable" else None)
        self._record(bound, target, decision, detail, source, record.id)
        m = self._metrics
        m.scores.labels(bound.binding.id, record.status).inc()
        if result is not None:
            for call in result.judge_calls:
                m.judge_calls.labels(call.model, call.status).inc()
                m.judge_seconds.observe(call.duration_ms / 1000)
                if call.input_tokens:
                    m.judge_tokens.labels("input").inc(call.input_tokens)
                if call.output_tokens:
                    m.judge_tokens.labels("output").inc(call.output_tokens)
        if record.judge_cost_usd:
            m.judge_cost.inc(record.judge_cost_usd)
        self._scores.append(record)
        self._dirty.set()
        return decision

    def _score_record(self, bound: BoundScorer, target: Target, source: str, result: ScorerResult | None,
                      error: BaseException | None, seconds: float) -> ScoreRecord:
        binding = bound.binding
        run_ids = [r.run_id for r in target.subject.runs] if isinstance(target.subject, Conversation) else [target.run_id]
        subject = target.subject.runs[-1] if isinstance(target.subject, Conversation) else target.subject
        metadata: dict[str, Any] = {"run_ids": run_ids, "convention": subject.convention, "model": subject.model,
                                    "service_name": subject.service_name}
        status = "error" if error is not None else (result.status if result else "error")
        score = result.score if result is not None and status == "ok" else None
        label = None
        if binding.threshold is not None and score is not None:
            label = "pass" if score >= binding.threshold else "fail"
        cause = error.__cause__ if isinstance(error, ScorerRunError) and error.__cause__ else error
        if isinstance(error, ScorerRunError):
            metadata["failed_step"] = error.failed_step
            metadata["completed_steps"] = list(error.completed_steps)
        if result is not None and result.judge_calls:
            metadata["judge_calls"] = [
                {"step": c.step, "model": c.model, "status": c.status, "attempts": c.attempts, "error": c.error,
                 "cost_usd": c.cost_usd, "input_tokens": c.input_tokens, "output_tokens": c.output_tokens,
                 "duration_ms": round(c.duration_ms, 2)} for c in result.judge_calls]
        return ScoreRecord(
            id=score_id(binding.id, target), scorer_id=binding.id,
            scorer_name=getattr(bound.scorer, "name", binding.id) or binding.id,
            run_id=target.run_id, trace_id=target.trace_id, span_id=target.span_id,
            conversation_id=target.conversation_id,
            entity_type="conversation" if target.kind == "conversation" else "agent", entity_id=target.agent_name,
            source=source, score=score, reason=result.reason if result is not None else None, status=status,
            error=str(error) if error is not None else None,
            error_type=type(cause).__name__ if cause is not None else None,
            label=label, threshold=binding.threshold,
            preprocess_step_result=result.preprocess_step_result if result else None,
            analyze_step_result=result.analyze_step_result if result else None,
            preprocess_prompt=result.preprocess_prompt if result else None,
            analyze_prompt=result.analyze_prompt if result else None,
            generate_score_prompt=result.generate_score_prompt if result else None,
            generate_reason_prompt=result.generate_reason_prompt if result else None,
            judge_model=result.judge_model if result else None,
            judge_input_tokens=result.judge_input_tokens if result else None,
            judge_output_tokens=result.judge_output_tokens if result else None,
            judge_cost_usd=result.judge_cost_usd if result else None,
            judge_attempts=result.judge_attempts if result else None,
            duration_ms=round(seconds * 1000, 3), sample_rate=binding.sampling.ratio, metadata=metadata)

    async def _writer(self) -> None:
        """Store what the workers produced, many rows per transaction (workers never wait)."""
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self._flush_decisions()
            except Exception:  # noqa: BLE001 - rows stay pending and are retried with the next batch
                log.exception("storing scores failed; retrying")
                await asyncio.sleep(1.0)
                self._dirty.set()

    async def flush(self) -> None:
        """Write every pending score and decision now and wait for the commit."""
        await self._flush_decisions()

    async def _flush_decisions(self) -> None:
        """Write every pending score and decision now (one group-committed job)."""
        scores, self._scores = self._scores, []
        decisions, self._decisions = self._decisions, []
        if not scores and not decisions:
            return
        try:
            await self._store.write_scores(scores, decisions)
        except BaseException:
            self._scores[:0], self._decisions[:0] = scores, decisions  # keep them for the next try
            raise
        if scores:
            for listener in self._score_listeners:
                try:
                    listener.on_scores(scores)
                except Exception:  # noqa: BLE001 - a listener must never fail score storage
                    log.exception("score listener %r failed", listener)

    # --- conversations and recovery ----------------------------------------------------------

    async def _tick(self) -> None:
        interval = max(0.05, min(1.0, self._settings.assembly.conversation_idle_s / 4))
        while True:
            await asyncio.sleep(interval)
            try:
                for conversation in self.tracker.pop_idle():
                    await self.score_conversation(conversation.conversation_id, "live")
                self._metrics.conversations_tracked.set(len(self.tracker))
            except Exception:  # noqa: BLE001 - keep the timer alive whatever one pass hits
                log.exception("scoring tick failed")

    async def score_conversation(self, conversation_id: str, source: str,
                                 extra_check: Callable[[Target], str | None] | None = None,
                                 bindings: Sequence[BoundScorer] | None = None) -> list[str | asyncio.Future[str]]:
        """Decide every conversation-scope binding for the stored conversation (all its runs)."""
        conversation = await self._store.load_conversation(conversation_id)
        if conversation is None:
            return []
        target = conversation_target(conversation)
        return [self.decide(bound, target, source, extra_check)
                for bound in (bindings if bindings is not None else self._conv_bindings)]

    async def _recover(self) -> None:
        """Score recent runs/conversations that have no decision for a current binding (the daemon
        stopped between assembly and scoring)."""
        window = self._settings.scoring.recover_window_s
        if window <= 0:
            return
        ids = [b.binding.id for b in self._bound]
        try:
            pending = await self._store.unscored_recent(ids, window_s=window)
        except Exception:  # noqa: BLE001 - recovery is best effort
            log.exception("scoring recovery query failed")
            return
        runs, conversations = pending.runs, pending.conversation_ids
        if runs or conversations:
            log.info("scoring recovery: %d run(s), %d conversation(s) without a decision", len(runs), len(conversations))
        for run in runs:
            target = run_target(run)
            for bound in self._run_bindings:
                self.decide(bound, target, "live")
        if self._conv_bindings and conversations:
            for cid in conversations:
                await self.score_conversation(cid, "live")
