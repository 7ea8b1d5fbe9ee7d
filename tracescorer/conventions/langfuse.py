"""Langfuse Python SDK v3 and later (OpenTelemetry-based; scope ``langfuse-sdk``).

Every observation is a span of the ``langfuse-sdk`` tracer, named after the observation (the
decorated function's name, or ``name=``), typed by ``langfuse.observation.type``: ``agent``,
``generation``, ``tool``, ``span``, ``chain``, ``retriever``, ``embedding``, ``evaluator``,
``guardrail``, ``event``. Content is ``langfuse.observation.input`` / ``.output``: strings as they
are, anything else JSON encoded; ``@observe`` records a call as ``{"args": [...], "kwargs":
{...}}`` and the return value. Generations add ``langfuse.observation.model.name`` and
``langfuse.observation.usage_details`` (JSON: ``{"input", "output", "total"}`` or the provider's
``prompt_tokens`` / ``completion_tokens``); through Langfuse's OpenAI drop-in
(``langfuse.openai``, one ``OpenAI-generation`` observation a call) the input is the message list
or ``{"messages", "tools"}`` and the output the assistant message.

- runs: ``agent`` observations, named after the observation; without one, the top Langfuse span
  of the work (an ``@observe()`` function of type ``span``), named after it. Langfuse's LangChain
  handler types a chain as ``agent`` when its name or class path says "agent" — LangGraph's
  ``agent`` node too: a node (``langfuse.observation.metadata.langgraph_node`` = its own name) is
  a step of its graph, whose span is the run, named after the graph; the tool definitions the
  handler appends to a generation's input as ``role: tool`` messages are dropped;
- the new input is the one string argument of the call (see :mod:`.calls`), the message list
  argument is what the agent was given; the model's input decides the rest;
- model calls: ``generation`` observations; tools: ``tool`` observations (arguments from the
  call record, the result from the output). Langfuse does not export tool call ids: calls are
  joined with their tool spans by name and arguments;
- conversation and user: ``session.id`` / ``user.id`` — v4 and later copy them onto every span
  (``propagate_attributes``), v3's ``update_current_trace`` sets them on the span it ran in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracescorer.conventions.base import AgentInfo, Convention, LlmCall, ToolExec, TraceFacts, TraceView, span_error
from tracescorer.conventions.calls import call_input, request_messages, response_messages, tool_arguments
from tracescorer.conventions.common import (
    ASSISTANT,
    any_content,
    first_str,
    loads_maybe,
    parse_result,
    usage_from,
)
from tracescorer.model import Span

NAME = "langfuse"
SCOPE = "langfuse-sdk"
TYPE = "langfuse.observation.type"
INPUT, OUTPUT = "langfuse.observation.input", "langfuse.observation.output"
MODEL = "langfuse.observation.model.name"
USAGE = "langfuse.observation.usage_details"
LEVEL, STATUS_MESSAGE = "langfuse.observation.level", "langfuse.observation.status_message"
NODE = "langfuse.observation.metadata.langgraph_node"

_USAGE_NAMES = {
    "input_tokens": ("input", "prompt_tokens", "input_tokens"),
    "output_tokens": ("output", "completion_tokens", "output_tokens"),
    "total_tokens": ("total", "total_tokens"),
    "cache_read_input_tokens": ("input_cached_tokens", "cache_read_input_tokens"),
    "reasoning_tokens": ("output_reasoning_tokens", "reasoning_tokens"),
}


def observation_type(span: Span) -> str:
    value = span.attributes.get(TYPE)
    return value.lower() if isinstance(value, str) else ""


def _is_langfuse(span: Span) -> bool:
    return span.scope.name == SCOPE or TYPE in span.attributes


def _error(span: Span) -> str | None:
    """The span's error, or the observation's when Langfuse marked it ``level=ERROR`` (the SDK
    leaves the OpenTelemetry status unset)."""
    error = span_error(span)
    if error is None and span.attributes.get(LEVEL) == "ERROR":
        error = first_str(span.attributes, STATUS_MESSAGE) or "error"
    return error


def _agent_info(span: Span, *, wrapper: bool = False) -> AgentInfo:
    attrs = span.attributes
    new_input, given = call_input(attrs.get(INPUT))
    return AgentInfo(
        span=span,
        name=span.name or None,
        model=first_str(attrs, MODEL),
        new_input=new_input,
        given=given,
        output=response_messages(attrs.get(OUTPUT)),
        wrapper=wrapper,
    )


def _graph_node(span: Span) -> bool:
    """A LangGraph node (its ``langgraph_node`` metadata is its own name): the LangChain handler
    types a node named like ``agent`` as an agent observation, but it is a step of its graph."""
    node = loads_maybe(span.attributes.get(NODE))  # JSON encoded from v5 on
    return isinstance(node, str) and node == span.name


def read_agent(span: Span, trace: TraceView) -> AgentInfo | None:
    if observation_type(span) != "agent" or not _is_langfuse(span):
        return None
    info = _agent_info(span)
    info.graph_node = _graph_node(span)
    return info


def read_root(span: Span, trace: TraceView) -> AgentInfo | None:
    """The top Langfuse observation of a run without an agent observation: the run, named after
    the observation (the decorated function)."""
    if not _is_langfuse(span) or observation_type(span) in ("generation", "tool", "embedding"):
        return None
    return _agent_info(span)


def _usage(value: Any) -> dict[str, int | float] | None:
    data = loads_maybe(value)
    return usage_from(data, _USAGE_NAMES) if isinstance(data, Mapping) else None


def _is_tool_definition(item: Any) -> bool:
    return (
        isinstance(item, Mapping)
        and item.get("role") == "tool"
        and "tool_call_id" not in item
        and isinstance(item.get("content"), Mapping)
        and ("function" in item["content"] or item["content"].get("type") == "function")
    )


def _without_tool_definitions(data: Any) -> Any:
    """The LangChain handler appends the tools offered to the model as ``{"role": "tool",
    "content": <definition>}`` messages: they are no messages of the conversation."""
    if isinstance(data, list) and any(_is_tool_definition(m) for m in data):
        return [m for m in data if not _is_tool_definition(m)]
    return data


def read_llm_call(span: Span, trace: TraceView) -> LlmCall | None:
    if observation_type(span) != "generation" or not _is_langfuse(span):
        return None
    attrs = span.attributes
    inputs = request_messages(_without_tool_definitions(loads_maybe(attrs.get(INPUT))))
    outputs = [m for m in response_messages(attrs.get(OUTPUT)) if m.role == ASSISTANT]
    return LlmCall(
        span=span,
        input=inputs,
        output=outputs,
        model=first_str(attrs, MODEL),
        usage=_usage(attrs.get(USAGE)),
        content_captured=any_content(inputs, outputs),
    )


def read_tool(span: Span, trace: TraceView) -> ToolExec | None:
    if observation_type(span) != "tool" or not _is_langfuse(span):
        return None
    attrs = span.attributes
    return ToolExec(
        span=span,
        name=span.name,
        arguments=tool_arguments(attrs.get(INPUT)),
        result=parse_result(attrs.get(OUTPUT)),
        error=_error(span),
    )


def detect(facts: TraceFacts) -> float:
    return 0.7 if SCOPE in facts.scopes or TYPE in facts.keys else 0.0


CONVENTION = Convention(
    name=NAME,
    detect=detect,
    agent=read_agent,
    llm_call=read_llm_call,
    tool=read_tool,
    root_agent=read_root,
    markers=(b"langfuse",),
)
