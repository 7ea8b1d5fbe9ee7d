"""When conversations go idle, and who scores them: assembly's job, two implementations.

A conversation is ready for its conversation-scope scorers once no run of it was stored for
``conversation_idle_s``. The idler tells its :class:`ConversationSink` (the scoring runner) and
waits for the answer: True once the conversation's decisions are stored, False when scoring was
abandoned (shutdown).

- :class:`LocalIdleConversations` (one daemon, duckdb mode): an in-memory
  :class:`~tracescorer.assembly.conversations.ConversationTracker` fed with the runs assembly
  stores. With worker processes each conversation has one owner (:mod:`tracescorer.feed.partition`):
  the worker that stored a turn tells the main process, which tells the owner's idler
  (:meth:`LocalIdleConversations.on_turns`); no claims. Conversations still waiting at a stop (or
  when their owner restarted) are found again by its next start's recovery.
- :class:`SharedIdleConversations` (postgres mode): the activity is stamped in PostgreSQL when
  runs are stored, by whichever daemon assembled them; every daemon claims idle conversations
  there (``FOR UPDATE SKIP LOCKED``, a lease it renews while it scores), so each is scored by one
  daemon. A claim is finished once the decisions are stored (a turn stored meanwhile makes it
  due again) and released, unscored, when scoring was abandoned; a daemon that dies leaves its
  claims to expire and another daemon takes them over. The sink is told the activity seq of the
  claim; its score rows carry it, so a late write of a lost claim loses to the newer scoring's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from tracescorer.aio import cancel
from tracescorer.assembly.conversations import ConversationTracker
from tracescorer.config import Settings
from tracescorer.metrics import Metrics
from tracescorer.model import AgentRun
from tracescorer.store.api import ConversationClaim, Coordination

log = logging.getLogger(__name__)


class ConversationSink(Protocol):
    """Scores an idle conversation (on the event loop)."""

    async def conversation_idle(self, conversation_id: str, activity_seq: int | None = None) -> bool:
        """True once every decision about it is stored; False when abandoned. ``activity_seq``:
        the activity a claim was taken at (its score rows name it, so the newer one wins)."""


class IdleConversations(Protocol):
    """Where idle conversations come from (see the module docstring)."""

    def on_runs(self, runs: Sequence[AgentRun]) -> None:
        """Runs were stored (on the event loop; must not block)."""

    async def start(self) -> None:
        """Start finding idle conversations and handing them to the sink."""

    async def stop(self, deadline: float) -> bool:
        """Stop finding idle conversations; settle those handed to the sink (wait until
        ``deadline``, monotonic seconds, then give up: they are due again). Stopped after the
        sink, which refuses new conversations once it stops."""


class _Base:
    def __init__(self, sink: ConversationSink, metrics: Metrics, tick_s: float) -> None:
        self._sink = sink
        self._metrics = metrics
        self._tick_s = tick_s
        self._loop_task: asyncio.Task[None] | None = None
        self._scoring: dict[asyncio.Task[bool], tuple[str, object]] = {}  # task -> (conversation, its claim)

    async def start(self) -> None:
        self._loop_task = asyncio.create_task(self._loop(), name="conversations-idle")

    async def stop(self, deadline: float) -> bool:
        await cancel([self._loop_task])
        self._loop_task = None
        return await self._settle_all(deadline)

    async def _settle_all(self, deadline: float) -> bool:
        raise NotImplementedError

    async def _loop(self) -> None:
        failures = 0
        while True:
            await asyncio.sleep(self._tick_s)
            try:
                await self.tick()
            except Exception as exc:  # noqa: BLE001 - keep the timer alive whatever one pass hits
                failures += 1
                if failures == 1:  # once per failure streak (the store may be down for a while)
                    log.warning("conversation idle pass failed (%s: %s); retrying", type(exc).__name__, exc)
                continue
            if failures:
                log.info("conversation idle passes work again after %d failure(s)", failures)
                failures = 0

    async def tick(self) -> None:
        raise NotImplementedError

    def _score(self, conversation_id: str, claim: ConversationClaim | None = None) -> asyncio.Task[bool]:
        seq = claim.seq if claim is not None else None
        task = asyncio.create_task(self._sink.conversation_idle(conversation_id, seq), name="conversation-score")
        self._scoring[task] = (conversation_id, claim)
        task.add_done_callback(self._on_task_done)
        return task

    def _on_task_done(self, task: asyncio.Task[bool]) -> None:
        found = self._scoring.pop(task, None)
        if found is not None:
            scored = not task.cancelled() and task.exception() is None and bool(task.result())
            self.settled(found[0], scored, found[1])

    def settled(self, conversation_id: str, scored: bool, claim: object = None) -> None:
        pass

    async def _wait_scoring(self, timeout_s: float) -> None:
        if self._scoring:
            await asyncio.wait(list(self._scoring), timeout=max(0.0, timeout_s))
        for task in list(self._scoring):
            task.cancel()
        if self._scoring:
            await asyncio.gather(*list(self._scoring), return_exceptions=True)


class LocalIdleConversations(_Base):
    """One daemon: idle is measured in memory (see the module docstring)."""

    def __init__(
        self,
        sink: ConversationSink,
        metrics: Metrics,
        *,
        idle_s: float,
        max_conversations: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(sink, metrics, max(0.05, min(1.0, idle_s / 4)))
        self.tracker = ConversationTracker(conversation_idle_s=idle_s, max_conversations=max_conversations, clock=clock)

    def on_runs(self, runs: Sequence[AgentRun]) -> None:
        self.on_turns([r.conversation_id for r in runs if r.conversation_id])

    def on_turns(self, conversation_ids: Sequence[str]) -> None:
        """Runs of these conversations were stored (here, or by another worker: this one owns them)."""
        self.tracker.touch(conversation_ids)
        self._metrics.conversations_tracked.set(len(self.tracker))

    async def tick(self) -> None:
        for conversation in self.tracker.pop_idle():
            self._score(conversation.conversation_id)
        self._metrics.conversations_tracked.set(len(self.tracker))

    async def _settle_all(self, deadline: float) -> bool:
        await self._wait_scoring(deadline - time.monotonic())
        return True


class SharedIdleConversations(_Base):
    """Several daemons: idle conversations are claimed in the shared store (see the module docstring)."""

    def __init__(
        self,
        sink: ConversationSink,
        store: Coordination,
        metrics: Metrics,
        *,
        idle_s: float,
        lease_s: float,
        interval_s: float,
        max_in_flight: int,
        max_age_s: float,
    ) -> None:
        super().__init__(sink, metrics, interval_s)
        self._store = store
        self._idle_s = idle_s
        self._lease_s = lease_s
        self._max_in_flight = max(1, max_in_flight)
        self._max_age_s = max_age_s if max_age_s > 0 else 10 * 365 * 86400.0
        self._claims: dict[str, ConversationClaim] = {}
        self._done: list[tuple[str, int]] = []
        self._release: list[str] = []
        self._renewed_at = time.monotonic()

    def on_runs(self, runs: Sequence[AgentRun]) -> None:
        pass  # the store stamped the activity when the runs were stored

    async def tick(self) -> None:
        await self._settle()
        if time.monotonic() - self._renewed_at >= self._lease_s / 3:
            await self._renew()
        room = self._max_in_flight - len(self._claims)
        if room <= 0:
            return
        claims = await self._store.claim_conversations(
            idle_s=self._idle_s, lease_s=self._lease_s, limit=room, max_age_s=self._max_age_s
        )
        for claim in claims:
            self._claims[claim.conversation_id] = claim
            self._metrics.conversation_claims.labels("takeover" if claim.takeover else "claimed").inc()
            if claim.takeover:
                log.info("conversation %s: took over a claim whose lease had run out", claim.conversation_id)
            self._score(claim.conversation_id, claim)
        self._metrics.conversations_tracked.set(len(self._claims))

    def settled(self, conversation_id: str, scored: bool, claim: object = None) -> None:
        """The scoring of ``claim`` (None: whichever is held) ended. A scoring whose claim was
        lost (and the conversation claimed again since) settles nothing: the new claim's own
        scoring, with the newer runs, does."""
        held = self._claims.get(conversation_id)
        if held is None or (claim is not None and held is not claim):
            return
        del self._claims[conversation_id]
        if scored:
            self._done.append((conversation_id, held.seq))
        else:
            self._release.append(conversation_id)

    async def _settle(self) -> None:
        done, self._done = self._done, []
        release, self._release = self._release, []
        if not done and not release:
            return
        try:
            kept = await self._store.finish_conversations(done, release)
        except BaseException:
            self._done[:0], self._release[:0] = done, release  # tried again next pass
            raise
        lost = len(done) - kept
        if lost:
            self._metrics.conversation_claims.labels("lost").inc(lost)
            log.warning(
                "%d conversation claim(s) had been taken over while scored (lease %gs too short for the "
                "judge?); they are scored again by the daemon that took them",
                lost,
                self._lease_s,
            )
        self._metrics.conversation_claims.labels("finished").inc(kept)
        if release:
            self._metrics.conversation_claims.labels("released").inc(len(release))

    async def _renew(self) -> None:
        self._renewed_at = time.monotonic()
        held = list(self._claims)
        if not held:
            return
        kept = set(await self._store.renew_conversations(held, self._lease_s))
        for cid in held:
            if cid not in kept:
                # forgotten here, so its end is not counted (or sent to the store) a second time
                self._claims.pop(cid, None)
                self._metrics.conversation_claims.labels("lost").inc()
                log.warning("conversation %s: claim lost (taken over after its lease ran out)", cid)

    async def _settle_all(self, deadline: float) -> bool:
        await self._wait_scoring(max(0.0, deadline - time.monotonic() - 0.5))
        for cid in list(self._claims):  # never started (or their task vanished): due again at once
            self.settled(cid, False)
        try:
            await asyncio.wait_for(self._settle(), max(0.5, deadline - time.monotonic()))
        except Exception as exc:  # noqa: BLE001 - the leases run out by themselves
            log.warning("could not release conversation claims (%s); they return when their lease runs out", exc)
            return False
        return True


def build_idler(
    sink: ConversationSink,
    metrics: Metrics,
    settings: Settings,
    coordination: Coordination | None,
    clock: Callable[[], float] = time.monotonic,
) -> IdleConversations:
    """One daemon measures idleness in memory (by ``clock``, monotonic seconds); several claim idle
    conversations in the shared store (by its clock)."""
    s = settings
    if coordination is None:
        return LocalIdleConversations(sink, metrics, idle_s=s.assembly.conversation_idle_s, clock=clock)
    pg = s.store.postgres
    # claims in flight per daemon: enough to keep its judges busy, few enough to spread the work
    in_flight = max(1, min(s.scoring.max_queue // 2, 4 * s.judge.max_concurrency))
    return SharedIdleConversations(
        sink,
        coordination,
        metrics,
        idle_s=s.assembly.conversation_idle_s,
        lease_s=pg.claim_lease_s,
        interval_s=pg.claim_interval_s,
        max_in_flight=in_flight,
        max_age_s=s.scoring.recover_window_s,
    )
