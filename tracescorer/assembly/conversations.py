"""Runs grouped into conversations, and when a conversation has gone idle.

:func:`group_conversations` is the pure grouping: runs sharing a conversation id, ordered by
start time (then run id, for a stable order). :class:`ConversationTracker` is a small state
machine the daemon drives: it is told about every (re-)extracted run and reports conversations
that saw no new run for ``conversation_idle_s`` — the moment multi-turn scorers can run.

Runs are keyed by run id, so a re-extracted run replaces its earlier version (history is never
counted twice). A run arriving after its conversation went idle starts a new tracked entry; the
daemon reads the earlier runs from the store. Not thread-safe (one asyncio loop owns it).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tracescorer.model import AgentRun, Conversation


def _order(run: AgentRun) -> tuple[int, str]:
    return (run.started_at, run.run_id)


def group_conversations(runs: Iterable[AgentRun]) -> list[Conversation]:
    """Conversations of the runs that have a conversation id, each ordered by start time.

    A run listed twice (same run id) counts once: the later one in ``runs`` wins. Conversations
    come back ordered by their first run's start time.
    """
    by_conv: dict[str, dict[str, AgentRun]] = {}
    for run in runs:
        if run.conversation_id:
            by_conv.setdefault(run.conversation_id, {})[run.run_id] = run
    convs = [
        Conversation(conversation_id=cid, runs=tuple(sorted(rs.values(), key=_order))) for cid, rs in by_conv.items()
    ]
    convs.sort(key=lambda c: (_order(c.runs[0]), c.conversation_id))
    return convs


@dataclass(slots=True)
class _Tracked:
    last_activity: float
    runs: dict[str, AgentRun] = field(default_factory=dict)


@dataclass(slots=True)
class ConversationStats:
    runs_added: int = 0
    runs_without_conversation: int = 0
    conversations_idle: int = 0
    conversations_evicted: int = 0
    conversations_tracked: int = 0


class ConversationTracker:
    """Tracks active conversations and reports those idle for ``conversation_idle_s``."""

    def __init__(
        self,
        *,
        conversation_idle_s: float = 900.0,
        max_conversations: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if conversation_idle_s <= 0 or max_conversations < 1:
            raise ValueError("conversation_idle_s > 0 and max_conversations >= 1 required")
        self.idle_s = conversation_idle_s
        self.max_conversations = max_conversations
        self._clock = clock
        self._active: OrderedDict[str, _Tracked] = OrderedDict()  # least recently active first
        self._evicted: list[Conversation] = []
        self.stats = ConversationStats()

    def add(self, runs: Iterable[AgentRun], now: float | None = None) -> None:
        """Record (re-)extracted runs; runs without a conversation id are only counted."""
        t = self._clock() if now is None else now
        for run in runs:
            if not run.conversation_id:
                self.stats.runs_without_conversation += 1
                continue
            tracked = self._active.get(run.conversation_id)
            if tracked is None:
                tracked = self._active[run.conversation_id] = _Tracked(last_activity=t)
            tracked.last_activity = t
            tracked.runs[run.run_id] = run
            self._active.move_to_end(run.conversation_id)
            self.stats.runs_added += 1
        self._evict_over_limit()

    def touch(self, conversation_ids: Iterable[str], now: float | None = None) -> None:
        """Record activity without keeping runs (callers that reload runs from the store when a
        conversation goes idle keep memory at one small entry per active conversation)."""
        t = self._clock() if now is None else now
        for cid in conversation_ids:
            tracked = self._active.get(cid)
            if tracked is None:
                tracked = self._active[cid] = _Tracked(last_activity=t)
            tracked.last_activity = t
            self._active.move_to_end(cid)
        self._evict_over_limit()

    def _evict_over_limit(self) -> None:
        while len(self._active) > self.max_conversations:
            cid, tracked = self._active.popitem(last=False)
            self._evicted.append(self._conversation(cid, tracked))
            self.stats.conversations_evicted += 1
        self.stats.conversations_tracked = len(self._active)

    def get(self, conversation_id: str) -> Conversation | None:
        tracked = self._active.get(conversation_id)
        return None if tracked is None else self._conversation(conversation_id, tracked)

    def pop_idle(self, now: float | None = None) -> list[Conversation]:
        """Conversations with no new run for ``conversation_idle_s`` (and any evicted early)."""
        t = self._clock() if now is None else now
        out, self._evicted = self._evicted, []
        while self._active:
            cid, tracked = next(iter(self._active.items()))
            if t - tracked.last_activity < self.idle_s:
                break
            self._active.popitem(last=False)
            out.append(self._conversation(cid, tracked))
            self.stats.conversations_idle += 1
        self.stats.conversations_tracked = len(self._active)
        return out

    def pop_all(self) -> list[Conversation]:
        """Every tracked conversation (shutdown), least recently active first."""
        out, self._evicted = self._evicted, []
        out.extend(self._conversation(cid, tr) for cid, tr in self._active.items())
        self._active.clear()
        self.stats.conversations_tracked = 0
        return out

    def __len__(self) -> int:
        return len(self._active)

    @staticmethod
    def _conversation(cid: str, tracked: _Tracked) -> Conversation:
        return Conversation(conversation_id=cid, runs=tuple(sorted(tracked.runs.values(), key=_order)))
