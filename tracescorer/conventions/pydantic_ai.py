"""pydantic-ai built-in instrumentation (also what Logfire shows).

The agent span (``invoke_agent <name>``, older ``agent run``) carries the whole exchange in
``pydantic_ai.all_messages`` (GenAI message parts; older versions: ``all_messages_events``, a
list of GenAI event bodies), ``final_result``, ``gen_ai.agent.name`` (older ``agent_name``),
``gen_ai.conversation.id`` (newer versions), ``gen_ai.aggregated_usage.*``. In its message format
tool results travel as ``role: user`` messages with ``tool_call_response`` parts: not user input.
Model spans use GenAI attributes (read by :mod:`.genai`); older versions put the message events
in an ``events`` JSON attribute, read here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracescorer.conventions.base import AgentInfo, Convention, LlmCall, TraceFacts, TraceView, whole
from tracescorer.conventions.common import (
    ASSISTANT,
    first_str,
    genai_usage,
    loads_maybe,
    output_from_text,
    parse_message,
    parse_messages,
    parse_system_instructions,
)
from tracescorer.conventions.genai import model_of
from tracescorer.model import Message, Span

NAME = "pydantic_ai"
_MARKERS = ("pydantic_ai.all_messages", "all_messages_events", "final_result")


def _event_messages(value: Any) -> list[Message]:
    """Older format: a list of GenAI event bodies (``gen_ai.choice`` wraps a ``message``)."""
    data = loads_maybe(value)
    if not isinstance(data, list):
        return []
    out = []
    for ev in data:
        if not isinstance(ev, Mapping):
            continue
        raw: Any = ev
        if "role" not in ev and isinstance(ev.get("message"), Mapping):
            raw = {"role": ASSISTANT, **ev["message"]}
        elif "role" not in ev and isinstance(ev.get("event.name"), str):
            role = ev["event.name"].removeprefix("gen_ai.").removesuffix(".message")
            raw = {**ev, "role": role}
        msg = parse_message(raw)
        if msg is not None and (msg.parts or msg.content):
            out.append(msg)
    return out


def _transcript(attrs: Mapping[str, Any]) -> list[Message]:
    if "pydantic_ai.all_messages" in attrs:
        return parse_messages(attrs["pydantic_ai.all_messages"])
    return _event_messages(attrs.get("all_messages_events"))


def read_agent(span: Span, trace: TraceView) -> AgentInfo | None:
    attrs = span.attributes
    if not any(k in attrs for k in _MARKERS):
        return None
    if attrs.get("gen_ai.operation.name") not in (None, "invoke_agent") and "agent_name" not in attrs:
        return None
    name = first_str(attrs, "gen_ai.agent.name", "agent_name")
    return AgentInfo(
        span=span,
        name=name,
        id=first_str(attrs, "gen_ai.agent.id"),
        conversation_id=first_str(attrs, "gen_ai.conversation.id"),
        model=first_str(attrs, "model_name", "gen_ai.request.model"),
        system=parse_system_instructions(attrs.get("gen_ai.system_instructions")),
        transcript=_transcript(attrs),
        output=output_from_text(attrs.get("final_result")),
        usage=genai_usage(attrs, "gen_ai.aggregated_usage.") or genai_usage(attrs),
    )


def read_llm_call(span: Span, trace: TraceView) -> LlmCall | None:
    """Older pydantic-ai model spans: message events in an ``events`` JSON attribute."""
    attrs = span.attributes
    if "events" not in attrs or "gen_ai.input.messages" in attrs:
        return None
    msgs = _event_messages(attrs["events"])
    if not msgs:
        return None
    events = loads_maybe(attrs["events"])
    # gen_ai.choice entries are the output; everything else was sent to the model.
    is_choice = [
        isinstance(e, Mapping) and (e.get("event.name") == "gen_ai.choice" or ("message" in e and "role" not in e))
        for e in events
        if isinstance(e, Mapping)
    ]
    inputs = [m for m, c in zip(msgs, is_choice, strict=False) if not c] if len(is_choice) == len(msgs) else msgs
    outputs = [m for m, c in zip(msgs, is_choice, strict=False) if c] if len(is_choice) == len(msgs) else []
    return LlmCall(span=span, input=inputs, output=outputs, model=model_of(attrs), usage=genai_usage(attrs))


def detect(facts: TraceFacts) -> float:
    if any(k in facts.keys for k in _MARKERS) or (
        "gen_ai.aggregated_usage.input_tokens" in facts.keys or "gen_ai.aggregated_usage.output_tokens" in facts.keys
    ):
        return 0.9
    if "events" in facts.keys:
        return 0.1  # older model spans' event lists
    return 0.0


CONVENTION = Convention(
    name=NAME,
    detect=detect,
    agent=read_agent,
    llm_call=read_llm_call,
    markers=(b"pydantic_ai", b"gen_ai.", whole("all_messages_events"), whole("final_result"), whole("events")),
)
