"""The stages after the segment log, built the same way in every worker.

:func:`build_runner` builds scoring (each worker's, and the daemon's own for backfills and the
healer); :class:`Pipeline` builds what reads the log for one share of the traces: the feed (with
triage and other tools' evaluations taken out), assembly, conversation idling, wired to a runner.
Each worker (:mod:`tracescorer.workers.child`, a process or the one on the daemon's loop) builds
one for its partition.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tracescorer.assembly.idle import IdleConversations, LocalIdleConversations, build_idler
from tracescorer.assembly.sources import SegmentLogSource
from tracescorer.assembly.stage import AssemblyStage, RunListener
from tracescorer.calibration.intake import EvaluationIntake
from tracescorer.clock import SYSTEM_CLOCK, Clock
from tracescorer.config import Settings
from tracescorer.conventions.registry import markers
from tracescorer.feed.partition import Partition
from tracescorer.feed.readback import LogTraces
from tracescorer.feed.stage import LogFeed
from tracescorer.feed.triage import Triage
from tracescorer.lifecycle import Stages
from tracescorer.metrics import Metrics
from tracescorer.model import AgentRun, LogRecord, Span
from tracescorer.runner.bindings import build_bindings
from tracescorer.runner.caps import BindingCaps
from tracescorer.runner.limits import SharedRateLimiter
from tracescorer.runner.recovery import RecoveryScope
from tracescorer.runner.stage import ScoringRunner
from tracescorer.runner.writer import ScoreListener
from tracescorer.seglog import LogReader
from tracescorer.store.factory import Stores


class _NoEvaluations:
    """The span-rows feed's prefilter: other tools' evaluations (and tracescorer's own sent back)
    are no span rows; the assembly feed's :class:`EvaluationIntake` stores and counts them."""

    def __init__(self, evaluations: EvaluationIntake) -> None:
        self._evaluations = evaluations

    def take(
        self, spans: Sequence[Span], logs: Sequence[LogRecord]
    ) -> tuple[Sequence[Span], Sequence[LogRecord], Sequence[object]]:
        spans, logs = self._evaluations.leave(spans, logs)
        return spans, logs, ()

    async def store(self, taken: Sequence[object]) -> None:
        """Nothing taken, nothing to keep."""

    def leave(self, spans: Sequence[Span], logs: Sequence[LogRecord]) -> tuple[Sequence[Span], Sequence[LogRecord]]:
        return self._evaluations.leave(spans, logs)


def build_runner(
    settings: Settings,
    stores: Stores,
    metrics: Metrics,
    listeners: Sequence[ScoreListener],
    *,
    recovery: RecoveryScope | None = None,
    shared_spend: bool = False,
    clock: Clock = SYSTEM_CLOCK,
) -> ScoringRunner:
    """Scoring for ``settings.scorers``; with coordination (several daemons on one PostgreSQL
    store) the judge's rate limit, daily budget and per-binding caps are shared; with
    ``shared_spend`` (worker processes of one daemon: each has its share of the rates,
    :mod:`tracescorer.workers.share`) the daily budgets follow the spend they all stored.
    ``recovery``: which targets left unscored it scores at start (default: all); ``clock``: what
    the time to score is read on."""
    s, coordination = settings, stores.coordination
    bound = build_bindings(s.scorers, s.judge)
    return ScoringRunner(
        bound,
        stores.runs,
        stores.scores,
        metrics,
        s,
        listeners=listeners,
        rate=SharedRateLimiter(coordination, s.judge.requests_per_minute) if coordination else None,
        shared_budget=coordination is not None or shared_spend,
        caps=BindingCaps(bound, shared=coordination),
        recovery=recovery,
        clock=clock,
    )


class _TurnsOut:
    """Tells ``send`` the conversations that got a run stored (the main process tells their owner)."""

    def __init__(self, send: Callable[[list[str]], None]) -> None:
        self._send = send

    def on_runs(self, runs: Sequence[AgentRun]) -> None:
        ids = sorted({r.conversation_id for r in runs if r.conversation_id})
        if ids:
            self._send(ids)


class Pipeline:
    """Feed, assembly and conversation idling for ``partition`` of the traces (None: all of them),
    handing runs to ``runner``; assembly's and triage's periods measured with ``clock``. ``turns``
    (a worker's): where the conversations that got a run stored are told, for their owner; this
    pipeline's idler then hears of the conversations it owns (:meth:`LocalIdleConversations.on_turns`)."""

    def __init__(
        self,
        settings: Settings,
        stores: Stores,
        metrics: Metrics,
        log: LogReader,
        runner: ScoringRunner,
        *,
        partition: Partition | None = None,
        clock: Clock = SYSTEM_CLOCK,
        turns: Callable[[list[str]], None] | None = None,
    ) -> None:
        s = settings
        self.runner = runner
        self.evaluations = EvaluationIntake(stores.evaluations, metrics)  # other tools' evaluations
        needs_idler = any(b.binding.scope == "conversation" for b in runner.bindings)
        self.conversations: IdleConversations | None = (
            build_idler(runner, metrics, s, stores.coordination, clock.monotonic) if needs_idler else None
        )
        told: RunListener | None = self.conversations
        if turns is not None and isinstance(self.conversations, LocalIdleConversations):
            told = _TurnsOut(turns)  # a conversation's owner may be another worker
        self.assembly = AssemblyStage(
            s.assembly,
            stores.span_log,
            stores.runs,
            metrics,
            SegmentLogSource(stores.span_log, LogTraces(log, self.evaluations), metrics),
            conversations=told,
            clock=clock.monotonic,
        )
        self.feed = LogFeed(
            log,
            stores.intake,
            stores.feed,
            metrics,
            max_batch_bytes=s.segment_log.feed_batch_bytes,
            retain_bytes=s.segment_log.retain_bytes,
            max_retain_bytes=s.segment_log.max_lag_bytes,
            listeners=[self.assembly],
            triage=self._triage(s, clock),
            prefilter=self.evaluations,
            partition=partition,
        )
        # the segment log is the only copy of a trace until it is assembled
        self.feed.position.add_hold(self.assembly.oldest_offset)
        self.assembly.add_listener(runner)
        # the stages hold the feed back, not the receivers: their backlog waits in the log, on disk
        self.feed.add_gate("assembly", self.assembly.backlog)
        self.feed.add_gate("scoring", runner.backlog)
        self.rows: LogFeed | None = None  # span rows, a derived copy (store.spans)
        if s.store.spans != "none":
            self.rows = rows = LogFeed(
                log,
                stores.intake,
                stores.feed,
                metrics,
                max_batch_bytes=s.segment_log.feed_batch_bytes,
                triage=self._triage(s, clock) if s.store.spans == "agent" else None,
                prefilter=_NoEvaluations(self.evaluations),
                partition=partition,
                rows=True,
            )
            self.feed.position.add_retain(lambda: rows.position.saved)
            metrics.span_rows_lag_bytes.set_function(lambda: rows.lag_bytes)
            behind = s.segment_log.feed_batch_bytes
            rows.add_gate("pipeline", lambda: "the pipeline is behind" if self.feed.lag_bytes > behind else None)

    @staticmethod
    def _triage(s: Settings, clock: Clock) -> Triage:
        return Triage(
            markers(),
            window_s=s.triage.window_s,
            # a trace's root may end as late as assembly waits for it
            agent_window_s=s.assembly.max_wait_s,
            max_traces=s.triage.max_traces,
            clock=clock.monotonic,
        )

    async def enter_idler(self, stages: Stages, *, reserve_s: float) -> None:
        """Start conversation idling (first: it settles claims after scoring stopped)."""
        if self.conversations is not None:
            await stages.enter(self.conversations, reserve_s=reserve_s)

    async def enter_intake(self, stages: Stages, *, reserve_s: float) -> None:
        """Start assembly, then the feed, then the span-rows feed (after scoring started; stopped
        before it)."""
        await stages.enter(self.assembly, reserve_s=reserve_s)
        await stages.enter(self.feed, reserve_s=reserve_s)
        if self.rows is not None:
            await stages.enter(self.rows, reserve_s=reserve_s)
