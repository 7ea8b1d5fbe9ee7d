"""What a binding scores: one run, or one conversation (with the agent span scores hang off)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from tracescorer.model import AgentRun, Conversation
from tracescorer.slotted import stored_through_slots

TargetKind = Literal["run", "conversation"]


@stored_through_slots
@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """A scoring target. ``trace_id``/``span_id`` name the agent span a score is attached to
    (for a conversation: its last run's agent span)."""

    kind: TargetKind
    id: str  # run id or conversation id
    subject: AgentRun | Conversation
    trace_id: str
    span_id: str
    run_id: str
    conversation_id: str | None
    agent_name: str | None
    activity_seq: int | None = None  # a conversation claimed at this activity (its score row says so)

    @property
    def sample_key(self) -> str:
        """Run scope samples on the trace id (like OTel's ratio sampler); conversations on their id."""
        return self.trace_id if self.kind == "run" else self.id


def run_target(run: AgentRun) -> Target:
    return Target(
        kind="run",
        id=run.run_id,
        subject=run,
        trace_id=run.trace_id,
        span_id=run.span_id,
        run_id=run.run_id,
        conversation_id=run.conversation_id,
        agent_name=run.agent_name,
    )


def conversation_target(conversation: Conversation, activity_seq: int | None = None) -> Target:
    last = conversation.runs[-1]
    return Target(
        kind="conversation",
        id=conversation.conversation_id,
        subject=conversation,
        trace_id=last.trace_id,
        span_id=last.span_id,
        run_id=last.run_id,
        conversation_id=conversation.conversation_id,
        agent_name=last.agent_name,
        activity_seq=activity_seq,
    )


def stable_id(*parts: str) -> str:
    """Deterministic id from its parts: re-scoring the same target upserts, never duplicates."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def score_id(scorer_id: str, target: Target) -> str:
    return target_score_id(scorer_id, target.kind, target.id)


def target_score_id(scorer_id: str, kind: TargetKind, target_id: str) -> str:
    """The id of the score row of ``scorer_id`` on the ``kind`` target ``target_id``."""
    return stable_id("score", scorer_id, kind, target_id)


def decision_id(scorer_id: str, target: Target) -> str:
    return stable_id("decision", scorer_id, target.kind, target.id)
