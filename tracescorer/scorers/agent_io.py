"""The agent-typed scorer run (``create_scorer(type="agent")``) and text helpers for scorers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracescorer.model import AgentRun, Conversation, Message, ToolCall
from tracescorer.scorers.types import ScorerRun
from tracescorer.slotted import stored_through_slots

AgentOutput = tuple[Message, ...]
"""``run.output`` of an agent scorer: the assistant messages, in order (tool calls as parts)."""


@stored_through_slots
@dataclass(frozen=True, kw_only=True, slots=True)
class AgentInput:
    """``run.input`` of an agent scorer.

    Attributes:
        input_messages: the new user turn(s) (for a conversation: every user turn).
        remembered_messages: earlier history the agent was given (no system messages).
        system_messages: system/developer instructions.
        tagged_system_messages: system messages by tag.
        tool_calls: the tool calls made while producing the output, with results and errors
            (an addition to Mastra's shape: trace data knows whether a tool failed).
    """

    input_messages: tuple[Message, ...] = ()
    remembered_messages: tuple[Message, ...] = ()
    system_messages: tuple[Message, ...] = ()
    tagged_system_messages: Mapping[str, tuple[Message, ...]] = field(default_factory=dict)
    tool_calls: tuple[ToolCall, ...] = ()


AgentScorerRun = ScorerRun[AgentInput, AgentOutput]


def agent_run_input(
    source: AgentRun | Conversation, *, ground_truth: Any = None, request_context: Mapping[str, Any] | None = None
) -> AgentScorerRun:
    """Build the agent-typed :class:`ScorerRun` of an :class:`AgentRun` or a :class:`Conversation`.

    For an AgentRun the fields map one to one. For a Conversation ``input_messages`` is every
    user turn and ``output`` every assistant message across its runs (like multi-turn
    ``run_evals``); remembered, system and tagged system messages come from the first run.
    ``run_id`` is the run's id (the conversation id for a conversation) and ``metadata`` names
    the scored target (``entity_type`` ``agent`` or ``conversation``, trace/span ids).
    """
    if isinstance(source, AgentRun):
        run_input = AgentInput(
            input_messages=source.input_messages,
            remembered_messages=source.remembered_messages,
            system_messages=source.system_messages,
            tagged_system_messages=dict(source.tagged_system_messages),
            tool_calls=source.tool_calls,
        )
        return ScorerRun(
            input=run_input,
            output=source.output,
            run_id=source.run_id,
            ground_truth=ground_truth,
            request_context=request_context,
            metadata=_metadata(source, "agent"),
        )
    if not isinstance(source, Conversation):
        raise TypeError(f"expected AgentRun or Conversation, got {type(source).__name__}")
    first = source.runs[0] if source.runs else None
    run_input = AgentInput(
        input_messages=source.input_messages,
        remembered_messages=first.remembered_messages if first else (),
        system_messages=first.system_messages if first else (),
        tagged_system_messages=dict(first.tagged_system_messages) if first else {},
        tool_calls=tuple(t for r in source.runs for t in r.tool_calls),
    )
    metadata: dict[str, Any] = {
        "entity_type": "conversation",
        "conversation_id": source.conversation_id,
        "run_ids": [r.run_id for r in source.runs],
    }
    if source.runs:
        last = source.runs[-1]
        metadata.update(trace_id=last.trace_id, span_id=last.span_id, agent_name=last.agent_name)
    return ScorerRun(
        input=run_input,
        output=source.output,
        run_id=source.conversation_id,
        ground_truth=ground_truth,
        request_context=request_context,
        metadata=metadata,
    )


def _metadata(run: AgentRun, entity_type: str) -> dict[str, Any]:
    return {
        "entity_type": entity_type,
        "trace_id": run.trace_id,
        "span_id": run.span_id,
        "conversation_id": run.conversation_id,
        "agent_name": run.agent_name,
    }


# -- text helpers shared by the prebuilt scorers -----------------------------------------------


def message_text(value: Any) -> str:
    """Plain text of a message, a list of messages, a string or a dict with ``content``."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Message):
        if value.content:
            return value.content
        return "\n".join(p.content for p in value.parts if p.type == "text" and p.content)
    if type(value) is tuple or type(value) is list:  # an agent run's output: before the ABC checks
        return "\n".join(t for t in map(message_text, value) if t)
    if isinstance(value, Mapping):
        return message_text(value.get("content"))
    if isinstance(value, Sequence):
        return "\n".join(t for t in (message_text(v) for v in value) if t)
    return str(value)


def input_text(run: ScorerRun[Any, Any]) -> str:
    """The user input of a run as text (every input message for agent runs)."""
    value = run.input
    if isinstance(value, AgentInput):
        return message_text(value.input_messages)
    return message_text(value)


def output_text(run: ScorerRun[Any, Any]) -> str:
    """The output of a run as text (assistant messages with text, joined by newlines)."""
    return message_text(run.output)


def assistant_texts(run: ScorerRun[Any, Any]) -> list[str]:
    """The text of every assistant message in ``run.output`` that has text, in order.

    A string output is one turn; in a message list, bare strings (not messages) are ignored."""
    output = run.output
    if isinstance(output, str):
        return [output] if output.strip() else []
    if isinstance(output, Message):
        output = [output]
    texts: list[str] = []
    for item in output if isinstance(output, Sequence) else []:
        if isinstance(item, str):
            continue  # a bare string in a message list is not an assistant message: not graded
        role = (
            item.role
            if isinstance(item, Message)
            else (item.get("role", "assistant") if isinstance(item, Mapping) else "assistant")
        )
        text = message_text(item)
        if role == "assistant" and text.strip():
            texts.append(text)
    return texts


def tool_calls_of(run: ScorerRun[Any, Any]) -> tuple[ToolCall, ...]:
    """The tool calls of a run: ``run.input.tool_calls`` when known, else the ``tool_call``
    parts of the output messages (results from matching ``tool_call_response`` parts)."""
    if isinstance(run.input, AgentInput) and run.input.tool_calls:
        return run.input.tool_calls
    calls: list[ToolCall] = []
    responses: dict[str, Any] = {}
    output = run.output if isinstance(run.output, Sequence) and not isinstance(run.output, str) else []
    for message in output:
        if not isinstance(message, Message):
            continue
        for part in message.parts:
            if part.type == "tool_call_response" and part.id:
                responses[part.id] = part.response
    for message in output:
        if not isinstance(message, Message):
            continue
        for part in message.parts:
            if part.type == "tool_call" and part.name:
                calls.append(
                    ToolCall(id=part.id, name=part.name, arguments=part.arguments, result=responses.get(part.id or ""))
                )
    return tuple(calls)
