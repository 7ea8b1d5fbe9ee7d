"""The stages after the segment log, built the same way in the daemon and in each worker process.

:func:`build_runner` builds scoring (the daemon always has one: backfills and the healer use it);
:class:`Pipeline` builds what reads the log for one share of the traces: the feed (with triage and
other tools' evaluations taken out), assembly, conversation idling, wired to a runner. With worker
processes (:mod:`tracescorer.workers.pool`) each worker builds one for its partition; without,
the daemon builds one for every trace.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracescorer.assembly.idle import IdleConversations, build_idler
from tracescorer.assembly.sources import SegmentLogSource
from tracescorer.assembly.stage import AssemblyStage
from tracescorer.calibration.intake import EvaluationIntake
from tracescorer.clock import SYSTEM_CLOCK, Clock
from tracescorer.config import Settings
from tracescorer.conventions.registry import markers
from tracescorer.feed.consumers import name as consumer_name
from tracescorer.feed.partition import Partition
from tracescorer.feed.readback import LogTraces
from tracescorer.feed.stage import LogFeed
from tracescorer.feed.triage import Triage
from tracescorer.lifecycle import Stages
from tracescorer.metrics import Metrics
from tracescorer.runner.bindings import build_bindings
from tracescorer.runner.caps import BindingCaps
from tracescorer.runner.limits import SharedRateLimiter
from tracescorer.runner.recovery import RecoveryScope
from tracescorer.runner.stage import ScoringRunner
from tracescorer.runner.writer import ScoreListener
from tracescorer.seglog import LogReader
from tracescorer.store.factory import Stores


def build_runner(
    settings: Settings,
    stores: Stores,
    metrics: Metrics,
    listeners: Sequence[ScoreListener],
    *,
    recovery: RecoveryScope | None = None,
) -> ScoringRunner:
    """Scoring for ``settings.scorers``; with coordination (several daemons or worker processes
    on one store) the judge's rate limit, daily budget and per-binding caps are shared.
    ``recovery``: which targets left unscored it scores at start (default: all)."""
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
        shared_budget=coordination is not None,
        caps=BindingCaps(bound, shared=coordination),
        recovery=recovery,
    )


class Pipeline:
    """Feed, assembly and conversation idling for ``partition`` of the traces (None: all of them),
    handing runs to ``runner``; assembly's and triage's periods measured with ``clock``."""

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
    ) -> None:
        s = settings
        self.runner = runner
        rowless = s.store.spans == "none"  # the segment log is the only copy of a trace until assembled
        self.evaluations = EvaluationIntake(stores.evaluations, metrics)  # other tools' evaluations
        needs_idler = any(b.binding.scope == "conversation" for b in runner.bindings)
        self.conversations: IdleConversations | None = (
            build_idler(runner, metrics, s, stores.coordination) if needs_idler else None
        )
        self.assembly = AssemblyStage(
            s.assembly,
            stores.span_log,
            stores.runs,
            metrics,
            conversations=self.conversations,
            share=(partition.index, partition.count) if partition is not None else None,
            consumer=consumer_name(partition),
            source=SegmentLogSource(stores.span_log, LogTraces(log, self.evaluations), metrics) if rowless else None,
            clock=clock.monotonic,
        )
        self.feed = LogFeed(
            log,
            stores.intake,
            stores.feed,
            metrics,
            max_batch_bytes=s.segment_log.feed_batch_bytes,
            retain_bytes=s.segment_log.retain_bytes,
            listeners=[self.assembly],
            triage=(
                Triage(
                    markers(),
                    window_s=s.triage.window_s,
                    # a trace's root may end as late as assembly waits for it
                    agent_window_s=s.assembly.max_wait_s,
                    max_traces=s.triage.max_traces,
                    clock=clock.monotonic,
                )
                if s.store.spans != "all"
                else None
            ),
            prefilter=self.evaluations,
            partition=partition,
            keep_rows=not rowless,
        )
        if rowless:
            self.feed.add_hold(self.assembly.oldest_offset)
        self.assembly.add_listener(runner)
        # the stages hold the feed back, not the receivers: their backlog waits in the log, on disk
        self.feed.add_gate("assembly", self.assembly.backlog)
        self.feed.add_gate("scoring", runner.backlog)

    async def enter_idler(self, stages: Stages, *, reserve_s: float) -> None:
        """Start conversation idling (first: it settles claims after scoring stopped)."""
        if self.conversations is not None:
            await stages.enter(self.conversations, reserve_s=reserve_s)

    async def enter_intake(self, stages: Stages, *, reserve_s: float) -> None:
        """Start assembly, then the feed (after scoring started; stopped before it)."""
        await stages.enter(self.assembly, reserve_s=reserve_s)
        await stages.enter(self.feed, reserve_s=reserve_s)
