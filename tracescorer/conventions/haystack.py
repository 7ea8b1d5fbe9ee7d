"""Haystack through ``openinference-instrumentation-haystack``: an extension of OpenInference.

The instrumentation writes CHAIN spans only — ``Pipeline.run`` > ``<Component>.run`` (an
``Agent`` component: ``Agent.run``) — with no LLM, TOOL or AGENT span. The conversation exists
only as Python repr strings of Haystack's dataclasses inside the JSON of ``input.value`` /
``output.value``: the Agent's input ``{"messages": ["ChatMessage(...)", ...]}`` (history and
the new user turn) and output ``{"messages": [...], "last_message": ...}`` (system prompt,
history, new turn, tool calls, tool results and the answer). A ``ChatMessage`` repr is
``ChatMessage(_role=<ChatRole.USER: 'user'>, _content=[TextContent(text=...), ToolCall(
tool_name, arguments, id), ToolCallResult(result, origin=ToolCall(...), error),
ReasoningContent(reasoning_text), ImageContent(...)], _name, _meta)``; Haystack before 2.9 wrote
``ChatMessage(content=..., role=<ChatRole...>, name, meta)``. The reprs are parsed by
:mod:`.pyrepr` (never evaluated); a run built from them says so:
``attributes["tracescorer.content_source"] = "python_repr"``.

The agent is named after its component name in the pipeline (the key of its output in
``Pipeline.run``'s ``output.value``); ``session.id`` is the conversation. Runs are labelled
``openinference``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracescorer.conventions import openinference
from tracescorer.conventions.base import AgentInfo, Convention, TraceFacts, TraceView
from tracescorer.conventions.common import (
    ASSISTANT,
    USER,
    as_str,
    first_str,
    loads_maybe,
    make_message,
    parse_arguments,
    text_part,
)
from tracescorer.conventions.pyrepr import ReprError, parse
from tracescorer.model import Message, Part, Span

NAME = "haystack"
SCOPE = "openinference.instrumentation.haystack"
CONTENT_SOURCE = "tracescorer.content_source"
PYTHON_REPR = "python_repr"


def _part(item: Any) -> Part | None:
    if isinstance(item, str):
        return text_part(item)
    if not isinstance(item, Mapping):
        return None
    kind = item.get("__class__")
    if kind == "TextContent":
        return text_part(as_str(item.get("text")))
    if kind == "ToolCall":
        return Part(
            type="tool_call",
            id=as_str(item.get("id")),
            name=as_str(item.get("tool_name")),
            arguments=parse_arguments(item.get("arguments")),
        )
    if kind == "ToolCallResult":
        origin = item.get("origin")
        origin = origin if isinstance(origin, Mapping) else {}
        extra = {"is_error": True} if item.get("error") is True else {}
        return Part(
            type="tool_call_response",
            id=as_str(origin.get("id")),
            name=as_str(origin.get("tool_name")),
            response=loads_maybe(item.get("result")),
            extra=extra,
        )
    if kind == "ReasoningContent":
        return Part(type="reasoning", content=as_str(item.get("reasoning_text")))
    if kind in ("ImageContent", "FileContent"):
        meta = {k: v for k, v in item.items() if k not in ("__class__", "base64_image", "base64_data")}
        return Part(type="blob" if kind == "ImageContent" else "file", extra=meta)
    return None


def chat_message(text: Any) -> Message | None:
    """One ``ChatMessage`` repr (either layout) as a message, or None when it is not one."""
    if not isinstance(text, str) or not text.startswith("ChatMessage("):
        return None
    try:
        data = parse(text)
    except ReprError:
        return None
    if not isinstance(data, Mapping):
        return None
    role = as_str(data.get("_role", data.get("role"))) or USER
    content = data.get("_content", data.get("content"))
    items = content if isinstance(content, list) else [content] if content is not None else []
    parts = [p for p in map(_part, items) if p is not None]
    name = as_str(data.get("_name", data.get("name")))
    if role == "tool":
        return Message(role="tool", content="", parts=tuple(parts), name=name)
    meta = data.get("_meta", data.get("meta"))
    finish = as_str(meta.get("finish_reason")) if isinstance(meta, Mapping) else None
    return make_message(role, parts, name=name, finish_reason=finish)


def chat_messages(value: Any) -> list[Message]:
    """The ``messages`` of a component's input or output JSON, parsed from their reprs."""
    data = loads_maybe(value)
    items = data.get("messages") if isinstance(data, Mapping) else data
    out = []
    for item in items if isinstance(items, list) else ():
        msg = chat_message(item)
        if msg is not None and (msg.parts or msg.content):
            out.append(msg)
    return out


def _component_name(span: Span, trace: TraceView) -> str | None:
    """The agent's name in its pipeline: the key of its output in ``Pipeline.run``'s output."""
    parent = trace.parent(span)
    if parent is None or not parent.name.startswith("Pipeline."):
        return None
    out = loads_maybe(parent.attributes.get("output.value"))
    if not isinstance(out, Mapping):
        return None
    mine = loads_maybe(span.attributes.get("output.value"))
    keys = [k for k, v in out.items() if isinstance(v, Mapping) and "messages" in v]
    for k in keys:
        if out[k] == mine:
            return str(k)
    return str(keys[0]) if len(keys) == 1 else None


def read_agent(span: Span, trace: TraceView) -> AgentInfo | None:
    """An ``Agent`` component's span: its messages from the reprs in its input and output."""
    if span.scope.name != SCOPE or openinference.kind(span) != "CHAIN":
        return None
    if not span.name.startswith("Agent.run"):
        return None
    attrs = span.attributes
    transcript = chat_messages(openinference._value(attrs, "output.value"))
    # The input's messages are the start of the output's transcript: read them only without one.
    given = [] if transcript else chat_messages(openinference._value(attrs, "input.value"))
    if not (transcript or given):
        return None
    output = [m for m in transcript if m.role == ASSISTANT][-1:]
    return AgentInfo(
        span=span,
        name=_component_name(span, trace),
        conversation_id=first_str(attrs, "session.id"),
        resource_id=first_str(attrs, "user.id"),
        given=given,
        transcript=transcript,
        output=output,
        attributes={CONTENT_SOURCE: PYTHON_REPR},
    )


def detect(facts: TraceFacts) -> float:
    return 0.85 if SCOPE in facts.scopes else 0.0


CONVENTION = Convention(name=NAME, label=openinference.NAME, detect=detect, agent=read_agent, markers=(SCOPE.encode(),))
