"""Mastra AI tracing exported through ``@mastra/otel-exporter`` (1.x and 0.x).

Every Mastra span says what it is in ``mastra.span.type``: ``agent_run`` (the run),
``model_generation`` (one generate/stream call, possibly several steps), ``model_step`` (one
model request), ``model_inference`` / ``chat`` (1.x: the model call with ``gen_ai.*`` messages),
``model_chunk`` (stream chunks, ignored), ``tool_call`` / ``mcp_tool_call``, memory and
processor spans (ignored).
1.x keys: ``mastra.<span_type>.input|output``, ``mastra.metadata.threadId|resourceId``,
``gen_ai.agent.name|id``, ``gen_ai.conversation.id``, ``gen_ai.system_instructions`` (often a
plain string). 0.x keys: generic ``input``/``output``, ``gen_ai.prompt``/``gen_ai.completion``
JSON, ``agent.id``, bare ``threadId``/``resourceId``, ``gen_ai.tool.input|output``.
Nested generation > step > inference spans describe one model call; the run builder merges them.
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
    USER,
    any_content,
    as_str,
    blob_output,
    first_str,
    genai_usage,
    loads_maybe,
    output_from_text,
    parse_arguments,
    parse_messages,
    parse_result,
    parse_system_instructions,
    text_message,
)
from tracescorer.model import Message, Part, Span

NAME = "mastra"
TYPE = "mastra.span.type"


def span_type(span: Span) -> str:
    value = span.attributes.get(TYPE)
    return value if isinstance(value, str) else ""


def _io(span: Span, which: str, *fallbacks: str) -> Any:
    """``mastra.<type>.<which>`` (1.x), else the given 0.x keys."""
    attrs = span.attributes
    key = f"mastra.{span_type(span)}.{which}"
    if key in attrs:
        return attrs[key]
    for fb in fallbacks:
        if fb in attrs:
            return attrs[fb]
    return None


def read_llm_call(span: Span, trace: TraceView) -> LlmCall | None:
    kind = span_type(span)
    if kind not in ("model_generation", "model_step"):
        return None  # model_inference spans carry gen_ai.* keys: read by .genai
    attrs = span.attributes
    inputs = parse_messages(_io(span, "input", "gen_ai.prompt", "input"))
    outputs = blob_output(_io(span, "output", "gen_ai.completion", "output"))
    return LlmCall(
        span=span,
        input=inputs,
        output=[m for m in outputs if m.role == ASSISTANT],
        model=first_str(attrs, "gen_ai.response.model", "gen_ai.request.model", "modelId"),
        usage=genai_usage(attrs),
        content_captured=any_content(inputs, outputs),
    )


def read_tool(span: Span, trace: TraceView) -> ToolExec | None:
    if span_type(span) not in ("tool_call", "mcp_tool_call"):
        return None
    attrs = span.attributes
    name = first_str(attrs, "gen_ai.tool.name", "mastra.tool_call.toolId", "toolId")
    if name is None:
        name = span.name.split(" ", 1)[-1]
    return ToolExec(
        span=span,
        name=name,
        id=first_str(attrs, "gen_ai.tool.call.id", "toolCallId"),
        arguments=parse_arguments(
            attrs.get("gen_ai.tool.call.arguments", _io(span, "input", "gen_ai.tool.input", "input"))
        ),
        result=parse_result(attrs.get("gen_ai.tool.call.result", _io(span, "output", "gen_ai.tool.output", "output"))),
        error=span_error(span),
    )


def _agent_input(value: Any) -> tuple[list[Message], list[Message]]:
    """(new input, given) from ``agent_run.input``: a string, or messages the app passed."""
    data = loads_maybe(value)
    if isinstance(data, str):
        return ([text_message(USER, data)] if data else []), []
    msgs = parse_messages(data)
    if any(m.role not in (USER, "system") for m in msgs):
        return [], msgs  # the app passed history along with the new turn
    return msgs, []


def read_agent(span: Span, trace: TraceView) -> AgentInfo | None:
    if span_type(span) != "agent_run":
        return None
    attrs = span.attributes
    new_input, given = _agent_input(_io(span, "input", "input"))
    name = first_str(attrs, "gen_ai.agent.name", "agent.name", "gen_ai.agent.id", "agent.id")
    if name is None and span.name.startswith("agent."):
        name = span.name[len("agent.") :]
    elif name is None and span.name.startswith("invoke_agent "):
        name = span.name[len("invoke_agent ") :]
    output = output_from_text(_io(span, "output", "output"))
    metadata = loads_maybe(attrs.get("mastra.metadata"))
    meta = metadata if isinstance(metadata, Mapping) else {}
    return AgentInfo(
        span=span,
        name=name,
        id=first_str(attrs, "gen_ai.agent.id", "agent.id"),
        conversation_id=first_str(attrs, "gen_ai.conversation.id", "mastra.metadata.threadId", "threadId")
        or first_str(meta, "threadId"),
        resource_id=first_str(attrs, "mastra.metadata.resourceId", "resourceId") or first_str(meta, "resourceId"),
        model=first_str(attrs, "gen_ai.request.model"),
        system=parse_system_instructions(
            attrs.get("gen_ai.system_instructions", attrs.get("mastra.agent_run.instructions"))
        ),
        new_input=new_input,
        given=given,
        output=output,
    )


def _tool_invocation(raw: Mapping[str, Any]) -> Part | None:
    """Mastra / AI SDK 4 UI message part ``{type: tool-invocation, toolInvocation: {...}}``."""
    inv = raw.get("toolInvocation") or {}
    if not isinstance(inv, Mapping):
        return None
    return Part(
        type="tool_call",
        id=as_str(inv.get("toolCallId")),
        name=as_str(inv.get("toolName")),
        arguments=parse_arguments(inv.get("args", inv.get("input"))),
        response=parse_result(inv.get("result")) if "result" in inv else None,
    )


def detect(facts: TraceFacts) -> float:
    return 0.9 if TYPE in facts.keys else 0.0


CONVENTION = Convention(
    name=NAME,
    detect=detect,
    agent=read_agent,
    llm_call=read_llm_call,
    tool=read_tool,
    parts={"tool-invocation": _tool_invocation},
    keyed_parts={"toolInvocation": _tool_invocation},
    markers=(TYPE.encode(),),
)
