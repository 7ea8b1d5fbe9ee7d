"""Vercel AI SDK telemetry (``experimental_telemetry`` / ``telemetry``).

v3–v6 (and v7 "legacy" mode): a top-level call span ``ai.generateText`` / ``ai.streamText`` /
``ai.generateObject`` / ``ai.streamObject`` is the run; its ``ai.prompt`` JSON holds ``system``
and either ``prompt`` (the new input only) or ``messages`` (history included). Model calls are
the inner ``ai.*.doGenerate`` / ``ai.*.doStream`` spans with ``ai.prompt.messages`` and
``ai.response.text`` / ``ai.response.toolCalls`` (older: ``ai.result.*``); tools are
``ai.toolCall`` spans (``ai.toolCall.name|id|args|input|result|output``). The agent name is the
app's ``ai.telemetry.functionId``; conversation ids come from ``ai.telemetry.metadata.*``.
v7 with its OpenTelemetry integration emits GenAI keys (read by :mod:`.genai`) and app context
as ``ai.settings.context.*``; this adapter labels those traces ``vercel``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracescorer.conventions.base import (
    AgentInfo,
    Convention,
    LlmCall,
    ToolExec,
    TraceFacts,
    TraceView,
    span_error,
)
from tracescorer.conventions.common import (
    ASSISTANT,
    SYSTEM,
    USER,
    any_content,
    as_str,
    first_str,
    genai_usage,
    loads_maybe,
    make_message,
    parse_arguments,
    parse_messages,
    parse_openai_tool_call,
    parse_result,
    text_message,
    tool_call_part,
    tool_response_part,
    usage_from,
)
from tracescorer.model import Message, Part, Span

NAME = "vercel"
_TOP = frozenset({"ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject"})
_MODEL_SUFFIXES = (".doGenerate", ".doStream")


def operation_id(span: Span) -> str:
    op = span.attributes.get("ai.operationId")
    if isinstance(op, str):
        return op
    # Older releases: only the span name (or "operation.name" = "<id> <functionId>").
    name = span.name.split(" ", 1)[0]
    return name if name.startswith("ai.") else ""


def _usage(attrs: Mapping[str, Any]) -> dict[str, int | float] | None:
    return usage_from(
        attrs,
        {
            "input_tokens": ("ai.usage.inputTokens", "ai.usage.promptTokens"),
            "output_tokens": ("ai.usage.outputTokens", "ai.usage.completionTokens"),
            "total_tokens": ("ai.usage.totalTokens",),
            "cache_read_input_tokens": ("ai.usage.cachedInputTokens", "ai.usage.inputTokenDetails.cacheReadTokens"),
            "reasoning_tokens": ("ai.usage.reasoningTokens", "ai.usage.outputTokenDetails.reasoningTokens"),
        },
    ) or genai_usage(attrs)


def _response(attrs: Mapping[str, Any]) -> list[Message]:
    text = first_str(attrs, "ai.response.text", "ai.result.text")
    obj = attrs.get("ai.response.object", attrs.get("ai.result.object"))
    if text is None and isinstance(obj, str):
        text = obj
    parts: list[Part] = []
    if text:
        parts.append(Part(type="text", content=text))
    calls = loads_maybe(attrs.get("ai.response.toolCalls", attrs.get("ai.result.toolCalls")))
    if isinstance(calls, list):
        parts.extend(p for p in map(parse_openai_tool_call, calls) if p is not None)
    return [make_message(ASSISTANT, parts)] if parts else []


def read_llm_call(span: Span, trace: TraceView) -> LlmCall | None:
    op = operation_id(span)
    attrs = span.attributes
    if not (op.endswith(_MODEL_SUFFIXES) or (op.startswith("ai.") and "ai.prompt.messages" in attrs)):
        return None
    inputs = parse_messages(attrs.get("ai.prompt.messages"))
    outputs = _response(attrs)
    return LlmCall(
        span=span,
        input=inputs,
        output=outputs,
        model=first_str(attrs, "ai.response.model", "ai.model.id", "gen_ai.response.model"),
        usage=_usage(attrs),
        content_captured=any_content(inputs, outputs),
    )


def read_tool(span: Span, trace: TraceView) -> ToolExec | None:
    attrs = span.attributes
    if operation_id(span) != "ai.toolCall" and "ai.toolCall.name" not in attrs:
        return None
    return ToolExec(
        span=span,
        name=first_str(attrs, "ai.toolCall.name") or span.name,
        id=first_str(attrs, "ai.toolCall.id"),
        arguments=parse_arguments(attrs.get("ai.toolCall.args", attrs.get("ai.toolCall.input"))),
        result=parse_result(attrs.get("ai.toolCall.result", attrs.get("ai.toolCall.output"))),
        error=span_error(span),
    )


def read_agent(span: Span, trace: TraceView) -> AgentInfo | None:
    if operation_id(span) not in _TOP:
        return None
    attrs = span.attributes
    prompt = loads_maybe(attrs.get("ai.prompt"))
    system: list[Message] = []
    new_input: list[Message] = []
    given: list[Message] = []
    if isinstance(prompt, Mapping):
        sys_value = prompt.get("system")
        if isinstance(sys_value, str) and sys_value:
            system = [text_message(SYSTEM, sys_value)]
        elif sys_value:
            system = [m for m in parse_messages(sys_value) if m.role == SYSTEM]
        if isinstance(prompt.get("prompt"), str):
            new_input = [text_message(USER, prompt["prompt"])]
        elif isinstance(prompt.get("prompt"), list):
            given = parse_messages(prompt["prompt"])
        if isinstance(prompt.get("messages"), list):
            given = parse_messages(prompt["messages"])
    elif isinstance(prompt, str) and prompt:
        new_input = [text_message(USER, prompt)]
    if not system and isinstance(attrs.get("ai.prompt.system"), str):
        system = [text_message(SYSTEM, attrs["ai.prompt.system"])]
    text = first_str(attrs, "ai.response.text", "ai.result.text")
    obj = attrs.get("ai.response.object", attrs.get("ai.result.object"))
    output_text = text if text is not None else (obj if isinstance(obj, str) else None)
    return AgentInfo(
        span=span,
        name=first_str(attrs, "ai.telemetry.functionId", "resource.name"),
        model=first_str(attrs, "ai.model.id"),
        system=system,
        new_input=new_input,
        given=given,
        output=[text_message(ASSISTANT, output_text)] if output_text else [],
        usage=_usage(attrs),
    )


# --- message parts (AI SDK model and UI messages) ----------------------------------------------


def _tool_result(raw: Mapping[str, Any]) -> Part:
    """``tool-result``: ``output`` is ``{type: json|text|error-text|error-json|..., value}`` (5+)."""
    if "output" in raw and "result" not in raw:
        out = raw["output"]
        value = out["value"] if isinstance(out, Mapping) and "type" in out and "value" in out else out
        if isinstance(out, Mapping) and str(out.get("type", "")).startswith("error"):
            return tool_response_part(raw, value, is_error=True)
        return tool_response_part(raw, value)
    return tool_response_part(raw, raw.get("result", raw.get("content")))


def _ui_tool_part(raw: Mapping[str, Any]) -> Part | None:
    """AI SDK 5 UI message part ``tool-<name>`` with ``toolCallId``, ``input``, ``output``."""
    if "toolCallId" not in raw:
        return None
    return Part(
        type="tool_call",
        id=as_str(raw.get("toolCallId")),
        name=str(raw.get("type"))[len("tool-") :],
        arguments=parse_arguments(raw.get("input", raw.get("args"))),
        response=parse_result(raw.get("output")) if "output" in raw else None,
    )


def _nothing(raw: Mapping[str, Any]) -> None:
    return None  # step markers and sources carry no message content


# --- detection --------------------------------------------------------------------------------


def detect(facts: TraceFacts) -> float:
    if "ai" not in facts.namespaces and not any(n.startswith("ai.") for n in facts.span_names):
        return 0.0
    if "ai.operationId" in facts.keys or any(
        n.split(" ", 1)[0] in _TOP or n.split(" ", 1)[0].endswith(_MODEL_SUFFIXES) for n in facts.span_names
    ):
        return 0.85
    if facts.has_prefix("ai.telemetry.") or "ai.toolCall.name" in facts.keys:
        return 0.8
    if facts.has_prefix("ai.settings.context."):
        return 0.6
    if "ai.prompt.messages" in facts.keys:
        return 0.5
    return 0.0


CONVENTION = Convention(
    name=NAME,
    detect=detect,
    agent=read_agent,
    llm_call=read_llm_call,
    tool=read_tool,
    parts={
        "tool-call": tool_call_part,
        "tool-result": _tool_result,
        "tool-*": _ui_tool_part,
        "step-start": _nothing,
        "source": _nothing,
        "source-url": _nothing,
        "source-document": _nothing,
    },
    markers=(b"ai.",),
)
