"""LangSmith in its OpenTelemetry mode (``LANGSMITH_OTEL_ENABLED`` / ``LANGSMITH_TRACING_MODE=otel``).

LangSmith's ``OTELExporter`` turns every LangSmith run into a span of the ``langsmith`` tracer
(LangChain / LangGraph callbacks, ``@traceable`` functions, ``wrap_openai``): named after the
run, ``langsmith.span.kind`` = the run type (``chain``, ``llm``, ``tool``, ``retriever``,
``prompt``, ``parser``, ...), ``gen_ai.operation.name`` = ``chat`` / ``execute_tool`` / the run
type, ``gen_ai.prompt`` / ``gen_ai.completion`` = the run's inputs and outputs as JSON,
``langsmith.metadata.<key>`` = its metadata (LangGraph's ``thread_id``, ``langgraph_node``,
...), ``gen_ai.tool.name`` / ``gen_ai.tool.call.id`` on tools, model and usage in GenAI keys.

- runs: a LangGraph graph — the span whose children are its nodes (a node's span is named after
  ``langsmith.metadata.langgraph_node``); a graph inside a node or a tool is a run of its own.
  Without a graph, the top LangSmith span holding model calls (a ``@traceable`` function), named
  after the run;
- model calls: ``llm`` runs; inputs ``{"messages": [[LangChain messages]]}`` (serialised with
  ``dumpd``) or an OpenAI request body (``wrap_openai``), outputs an ``LLMResult``
  (``generations``) or a chat completion. The other runs (graph nodes, prompts, routers) repeat
  the state's messages and are never read as model calls;
- tools: ``tool`` runs; arguments from the inputs (``{"input": ...}`` for a string input), the
  result from the output's ``ToolMessage``;
- conversation: ``langsmith.metadata.thread_id`` (also ``session_id`` / ``conversation_id``,
  the metadata keys LangSmith groups threads by); ``langsmith.trace.session_id`` is the LangSmith
  *project*, not a conversation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracescorer.conventions.base import (
    NOT_ONE,
    AgentInfo,
    Convention,
    LlmCall,
    NotOne,
    ToolExec,
    TraceFacts,
    TraceView,
    span_error,
)
from tracescorer.conventions.calls import call_input, request_messages, response_messages, unwrap_output
from tracescorer.conventions.common import (
    ASSISTANT,
    any_content,
    first_str,
    genai_usage,
    loads_maybe,
    unwrap_tool_output,
)
from tracescorer.model import Span

NAME = "langsmith"
SCOPE = "langsmith"
KIND = "langsmith.span.kind"
RUN_NAME = "langsmith.trace.name"
NODE = "langsmith.metadata.langgraph_node"
INPUTS, OUTPUTS = "gen_ai.prompt", "gen_ai.completion"


def run_type(span: Span) -> str:
    kind = span.attributes.get(KIND)
    return kind.lower() if isinstance(kind, str) else ""


def _name(span: Span) -> str | None:
    return first_str(span.attributes, RUN_NAME) or span.name or None


def _is_node(span: Span) -> bool:
    node = span.attributes.get(NODE)
    return isinstance(node, str) and node == _name(span)


def _is_graph(span: Span, trace: TraceView) -> bool:
    return run_type(span) == "chain" and any(_is_node(c) for c in trace.children.get(span.span_id, ()))


def _agent_info(span: Span) -> AgentInfo:
    attrs = span.attributes
    new_input, given = call_input(attrs.get(INPUTS))
    return AgentInfo(
        span=span,
        name=_name(span),
        model=first_str(attrs, "gen_ai.response.model", "gen_ai.request.model"),
        new_input=new_input,
        given=given,
        output=response_messages(attrs.get(OUTPUTS)),
    )


def read_agent(span: Span, trace: TraceView) -> AgentInfo | None:
    """A LangGraph graph (the span whose children are its nodes) is one agent invocation."""
    if KIND not in span.attributes or not _is_graph(span, trace):
        return None
    return _agent_info(span)


def read_root(span: Span, trace: TraceView) -> AgentInfo | None:
    """The top LangSmith run above the model calls (a ``@traceable`` function, a chain)."""
    if KIND not in span.attributes or run_type(span) in ("llm", "tool"):
        return None
    return _agent_info(span)


def read_llm_call(span: Span, trace: TraceView) -> LlmCall | NotOne | None:
    kind = run_type(span)
    if not kind:
        return None
    if kind != "llm":
        return NOT_ONE  # graph nodes, prompts, routers: they repeat the state's messages
    attrs = span.attributes
    inputs = request_messages(attrs.get(INPUTS))
    outputs = [m for m in response_messages(attrs.get(OUTPUTS)) if m.role == ASSISTANT]
    return LlmCall(
        span=span,
        input=inputs,
        output=outputs,
        model=first_str(attrs, "gen_ai.response.model", "gen_ai.request.model"),
        usage=genai_usage(attrs),
        content_captured=any_content(inputs, outputs),
    )


def _tool_arguments(value: Any) -> Any:
    data = loads_maybe(value)
    if isinstance(data, Mapping) and set(data) == {"input"}:
        return loads_maybe(data["input"])  # a tool given one string: LangSmith keys it "input"
    return data


def read_tool(span: Span, trace: TraceView) -> ToolExec | None:
    if run_type(span) != "tool":
        return None
    attrs = span.attributes
    result, call_id = unwrap_tool_output(loads_maybe(attrs.get(OUTPUTS)))
    return ToolExec(
        span=span,
        name=first_str(attrs, "gen_ai.tool.name") or _name(span) or span.name,
        id=first_str(attrs, "gen_ai.tool.call.id") or call_id,
        arguments=_tool_arguments(attrs.get(INPUTS)),
        result=unwrap_output(result),
        error=span_error(span),
    )


def detect(facts: TraceFacts) -> float:
    return 0.78 if KIND in facts.keys else 0.0


CONVENTION = Convention(
    name=NAME,
    detect=detect,
    agent=read_agent,
    llm_call=read_llm_call,
    tool=read_tool,
    root_agent=read_root,
    markers=(KIND.encode(),),
)
