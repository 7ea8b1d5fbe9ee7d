"""Builders of agent runs and messages for the scoring tests."""

from __future__ import annotations

from tracescorer.model import AgentRun, Message, Part, ToolCall

MODEL = "openai/fake-judge"


def text_message(role: str, text: str) -> Message:
    return Message(role=role, content=text, parts=(Part(type="text", content=text),))


def tool_message(*names: str) -> Message:
    return Message(
        role="assistant",
        content="",
        parts=tuple(Part(type="tool_call", id=f"call_{i}", name=n, arguments={"q": i}) for i, n in enumerate(names)),
    )


def make_run(
    *,
    user: str = "What is the weather in Paris?",
    output: tuple[Message, ...] | None = None,
    tool_calls: tuple[ToolCall, ...] = (),
    run_id: str = "run-1",
    conversation_id: str | None = None,
    started_at: int = 1,
) -> AgentRun:
    return AgentRun(
        run_id=run_id,
        trace_id="t" * 32,
        span_id="s" * 16,
        parent_span_id=None,
        conversation_id=conversation_id,
        resource_id=None,
        agent_name="weather",
        agent_id=None,
        service_name="svc",
        convention="genai",
        model="gpt-x",
        started_at=started_at,
        ended_at=started_at + 1,
        status="ok",
        error=None,
        input_messages=(text_message("user", user),),
        remembered_messages=(text_message("user", "hi"), text_message("assistant", "hello")),
        system_messages=(text_message("system", "You are a weather bot."),),
        tagged_system_messages={"rules": (text_message("system", "be brief"),)},
        output=output if output is not None else (text_message("assistant", "Sunny, 21C."),),
        tool_calls=tool_calls,
    )
