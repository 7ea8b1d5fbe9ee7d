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

from tracescorer.conventions.base import AgentInfo, LlmCall, ToolExec, TraceView, span_error
from tracescorer.conventions.common import (
    ASSISTANT,
    SYSTEM,
    USER,
    any_content,
    first_str,
    genai_usage,
    loads_maybe,
    make_message,
    parse_arguments,
    parse_messages,
    parse_openai_tool_call,
    parse_result,
    text_message,
    usage_from,
)
from tracescorer.conventions.runs import BuilderAdapter
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
            "cache_read_input_tokens": ("ai.usage.cachedInputTokens",
                                        "ai.usage.inputTokenDetails.cacheReadTokens"),
            "reasoning_tokens": ("ai.usage.reasoningTokens",
                                 "ai.usage.outputTokenDetails.reasoningTokens"),
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


class VercelAdapter(BuilderAdapter):
    """Vercel AI SDK ``ai.*`` spans, and the v7 GenAI form with ``ai.settings.context.*``."""

    name = NAME
    agent_reader = staticmethod(read_agent)

    def detect(self, trace: TraceView) -> float:
        if any(operation_id(s) in _TOP or operation_id(s).endswith(_MODEL_SUFFIXES) for s in trace.spans):
            return 0.85
        if trace.has_prefix("ai.telemetry.") or trace.has_key("ai.toolCall.name"):
            return 0.8
        if trace.has_prefix("ai.settings.context."):
            return 0.6
        return 0.0
