"""Strands Agents (``strands.telemetry.tracer``): an extension of the GenAI convention.

Strands emits GenAI spans (``invoke_agent`` > ``execute_event_loop_cycle`` > ``chat`` /
``execute_tool``). In its default mode the messages are only in span events
(``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message``,
``gen_ai.choice``) whose ``content`` / ``message`` is a JSON list of Bedrock-style content
blocks: ``{"text"}``, ``{"toolUse": {toolUseId, name, input}}``, ``{"toolResult": {toolUseId,
content: [blocks], status}}``, ``{"reasoningContent": {"reasoningText": {"text"}}}``, images and
documents. Tool arguments and results are events on the ``execute_tool`` span
(``gen_ai.tool.message`` with the arguments and ``id``, ``gen_ai.choice`` with the result
blocks). With ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` it writes the current
GenAI attributes instead, tool results still as content blocks.

This module adds the content-block part shapes, the ``execute_tool`` reader for both modes (a
result that is only text blocks reads as its text) and detection by the tracer's scope. The
``execute_event_loop_cycle`` spans repeat the cycle's messages in events; they are not model
calls (the GenAI reader skips spans of other operations). Runs are labelled ``genai``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracescorer.conventions import genai
from tracescorer.conventions.base import Convention, ToolExec, TraceFacts, TraceView, span_error
from tracescorer.conventions.common import (
    as_str,
    first_str,
    loads_maybe,
    parse_arguments,
)
from tracescorer.model import Part, Span

NAME = "strands"
SCOPE = "strands.telemetry.tracer"


def block_text(blocks: Any) -> Any:
    """Content blocks that are all text, as their text (newline-joined); anything else as is."""
    data = loads_maybe(blocks)
    if (
        isinstance(data, list)
        and data
        and all(isinstance(b, Mapping) and set(b) == {"text"} and isinstance(b["text"], str) for b in data)
    ):
        return "\n".join(b["text"] for b in data)
    return data


# --- content blocks ---------------------------------------------------------------------------


def _tool_use(raw: Mapping[str, Any]) -> Part | None:
    use = raw.get("toolUse")
    if not isinstance(use, Mapping):
        return None
    return Part(
        type="tool_call",
        id=as_str(use.get("toolUseId")),
        name=as_str(use.get("name")),
        arguments=parse_arguments(use.get("input")),
    )


def _tool_result(raw: Mapping[str, Any]) -> Part | None:
    res = raw.get("toolResult")
    if not isinstance(res, Mapping):
        return None
    extra = {"is_error": True} if res.get("status") == "error" else {}
    return Part(
        type="tool_call_response", id=as_str(res.get("toolUseId")), response=block_text(res.get("content")), extra=extra
    )


def _reasoning(raw: Mapping[str, Any]) -> Part | None:
    block = raw.get("reasoningContent")
    text = block.get("reasoningText") if isinstance(block, Mapping) else None
    content = text.get("text") if isinstance(text, Mapping) else None
    return Part(type="reasoning", content=content if isinstance(content, str) else None)


def _media(kind: str) -> Any:
    def parse(raw: Mapping[str, Any]) -> Part:
        block = raw.get(kind)
        meta = {k: v for k, v in block.items() if k != "source"} if isinstance(block, Mapping) else {}
        return Part(type="blob" if kind == "image" else "file", extra={"modality": kind, **meta})

    return parse


# --- tools ------------------------------------------------------------------------------------


def read_tool(span: Span, trace: TraceView) -> ToolExec | None:
    if span.scope.name != SCOPE or genai.operation(span) != "execute_tool":
        return None
    attrs = span.attributes
    arguments = parse_arguments(attrs.get("gen_ai.tool.call.arguments"))
    result = block_text(attrs.get("gen_ai.tool.call.result"))
    for ev in span.events:  # the default mode's events
        if ev.name == "gen_ai.tool.message" and arguments is None:
            arguments = parse_arguments(ev.attributes.get("content"))
        elif ev.name == "gen_ai.choice" and result is None:
            result = block_text(ev.attributes.get("message"))
    name = first_str(attrs, "gen_ai.tool.name") or span.name.removeprefix("execute_tool ")
    return ToolExec(
        span=span,
        name=name,
        id=first_str(attrs, "gen_ai.tool.call.id"),
        arguments=arguments,
        result=result,
        error=span_error(span),
    )


def detect(facts: TraceFacts) -> float:
    return 0.55 if SCOPE in facts.scopes else 0.0


CONVENTION = Convention(
    name=NAME,
    label=genai.NAME,
    detect=detect,
    tool=read_tool,
    keyed_parts={
        "toolUse": _tool_use,
        "toolResult": _tool_result,
        "reasoningContent": _reasoning,
        "image": _media("image"),
        "document": _media("document"),
    },
    markers=(SCOPE.encode(),),
)
