"""Builders of agent runs and conversations for the binding/filter tests."""

from __future__ import annotations

from typing import Any

from tracescorer.model import AgentRun, Conversation, Message, Part

S = 1_000_000_000  # nanoseconds per second


def msg(role: str, text: str) -> Message:
    parts = (Part(type="text", content=text),) if text else ()
    return Message(role=role, content=text, parts=parts)


def run(
    *,
    run_id: str = "r1",
    agent_name: str | None = "support-bot",
    service_name: str | None = "helpdesk",
    convention: str = "genai",
    conversation_id: str | None = "c1",
    status: str = "ok",
    started_at: int = 100 * S,
    duration_s: float = 2.0,
    user: str | tuple[str, ...] = "How do I get a refund?",
    answer: str | tuple[str, ...] = "Open Settings > Billing.",
    attributes: dict[str, Any] | None = None,
) -> AgentRun:
    users = (user,) if isinstance(user, str) else user
    answers = (answer,) if isinstance(answer, str) else answer
    return AgentRun(
        run_id=run_id,
        trace_id="0af7651916cd43dd8448eb211c80319c",
        span_id="b7ad6b7169203331",
        parent_span_id=None,
        conversation_id=conversation_id,
        resource_id=None,
        agent_name=agent_name,
        agent_id=None,
        service_name=service_name,
        convention=convention,
        model="gpt-x",
        started_at=started_at,
        ended_at=started_at + int(duration_s * S),
        status=status,
        error="boom" if status == "error" else None,
        input_messages=tuple(msg("user", u) for u in users),
        remembered_messages=(msg("user", "earlier HISTORY question"),),
        system_messages=(msg("system", "SYSTEM prompt"),),
        output=tuple(msg("assistant", a) for a in answers),
        attributes=attributes if attributes is not None else {"tenant": "acme", "tier": 2},
    )


def conversation(*runs: AgentRun, conversation_id: str = "c1") -> Conversation:
    return Conversation(conversation_id=conversation_id, runs=runs)
