"""MLflow tracing exported over OTLP (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; MLflow 3).

MLflow's ``OtelSpanProcessor`` exports its own spans (scope ``mlflow.tracing.provider``) with
every attribute value JSON encoded, strings included (``mlflow.spanType = "\\"AGENT\\""``):

- ``mlflow.spanType``: ``AGENT``, ``CHAT_MODEL``, ``LLM``, ``TOOL``, ``CHAIN``, ``RETRIEVER``,
  ``PARSER``, ``EMBEDDING``, ``UNKNOWN``, ...; the span name is the traced function's (or the
  autolog integration's: ``Completions`` for the OpenAI client);
- ``mlflow.spanInputs`` / ``mlflow.spanOutputs``: a traced function's arguments by parameter
  name and its return value; an autologged model call's request and response (the OpenAI chat
  request body and the chat completion);
- ``mlflow.llm.model``, ``mlflow.chat.tokenUsage`` (``{"input_tokens", "output_tokens",
  "total_tokens"}``); LangChain runs (``mlflow.langchain.autolog()``) add their ``metadata``
  (JSON), where LangGraph puts the ``thread_id``: the conversation.

Runs: ``AGENT`` spans, named after the span; without one, the top MLflow span holding the model
calls. Through ``mlflow.openai.autolog()`` the OpenAI Agents SDK's agents are ``AGENT`` spans
named after the agent (``handoffs`` / ``output_type`` attributes, no input: the model calls
tell), its ``Generation`` spans ``CHAT_MODEL`` around the client's own, its function tools
``TOOL``; the ``AgentRunner.run`` span MLflow opens (``mlflow.openai.agent_run_root``) and the
``AGENT`` span mirroring an ``agents.trace()`` (no input, no output) only group the run. Model calls: ``CHAT_MODEL`` / ``LLM``; tools: ``TOOL`` (no tool call id is exported: calls
join their tool spans by name and arguments). The session and user MLflow keeps as trace
metadata (``mlflow.trace.session`` / ``mlflow.trace.user``) are not exported over OTLP: such runs
have no conversation id. With ``MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true`` MLflow exports GenAI
semantic-convention attributes instead, read by :mod:`.genai`.
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
from tracescorer.conventions.calls import call_input, request_messages, response_messages
from tracescorer.conventions.common import ASSISTANT, any_content, as_str, loads_maybe, usage_from
from tracescorer.model import Span

NAME = "mlflow"
TYPE = "mlflow.spanType"
INPUTS, OUTPUTS = "mlflow.spanInputs", "mlflow.spanOutputs"
MODEL, USAGE = "mlflow.llm.model", "mlflow.chat.tokenUsage"
#: Marks the span MLflow opens around the OpenAI Agents SDK's ``Runner.run``.
RUN_ROOT = "mlflow.openai.agent_run_root"
_MODEL_TYPES = frozenset({"CHAT_MODEL", "LLM"})
#: Spans that are parts of a run, never its top (the run is what holds them).
_PART_TYPES = frozenset({"CHAT_MODEL", "LLM", "TOOL", "EMBEDDING", "RETRIEVER", "RERANKER", "PARSER"})


def value(span: Span, key: str) -> Any:
    """An MLflow attribute's value: JSON decoded (MLflow encodes every value, strings too)."""
    return loads_maybe(span.attributes.get(key))


def span_type(span: Span) -> str:
    kind = value(span, TYPE)
    return kind.upper() if isinstance(kind, str) else ""


_THREAD_KEYS = ("thread_id", "session_id", "conversation_id")


def _thread(span: Span, trace: TraceView) -> str | None:
    """The LangGraph thread (or session) id of a LangChain run MLflow traced: its ``metadata``
    attribute (JSON) on the span or an ancestor."""
    for s in (span, *trace.ancestors(span)):
        meta = value(s, "metadata") if "metadata" in s.attributes else None
        if isinstance(meta, Mapping):
            found = next((as_str(meta[k]) for k in _THREAD_KEYS if meta.get(k) not in (None, "")), None)
            if found:
                return found
    return None


def _agent_info(span: Span, trace: TraceView) -> AgentInfo:
    new_input, given = call_input(span.attributes.get(INPUTS))
    return AgentInfo(
        span=span,
        name=span.name or None,
        conversation_id=_thread(span, trace),
        new_input=new_input,
        given=given,
        output=response_messages(span.attributes.get(OUTPUTS)),
    )


def read_agent(span: Span, trace: TraceView) -> AgentInfo | NotOne | None:
    if span_type(span) != "AGENT":
        return None
    attrs = span.attributes
    if RUN_ROOT in attrs:
        # The OpenAI Agents SDK's Runner.run as MLflow records it: around the SDK's agent span,
        # or (inside the app's agents.trace()) beside it, holding nothing.
        if not trace.children.get(span.span_id):
            return NOT_ONE
        info = _agent_info(span, trace)
        info.wrapper = True
        return info
    info = _agent_info(span, trace)
    # An agents.trace() MLflow mirrors as an AGENT span of its own: no input, no output, no
    # agent of the SDK (those record their handoffs and output type). It groups the run.
    if value(span, INPUTS) in ("", None) and value(span, OUTPUTS) in ("", None) and "handoffs" not in attrs:
        info.wrapper = True
    return info


def read_root(span: Span, trace: TraceView) -> AgentInfo | None:
    """The top MLflow span of a run without an ``AGENT`` span (a ``CHAIN`` function, say)."""
    kind = span_type(span)
    return _agent_info(span, trace) if kind and kind not in _PART_TYPES else None


def read_llm_call(span: Span, trace: TraceView) -> LlmCall | None:
    if span_type(span) not in _MODEL_TYPES:
        return None
    inputs = request_messages(span.attributes.get(INPUTS))
    outputs = [m for m in response_messages(span.attributes.get(OUTPUTS)) if m.role == ASSISTANT]
    usage = value(span, USAGE)
    model = value(span, MODEL)
    return LlmCall(
        span=span,
        input=inputs,
        output=outputs,
        model=as_str(model) if model else None,
        usage=usage_from(
            usage,
            {
                "input_tokens": ("input_tokens",),
                "output_tokens": ("output_tokens",),
                "total_tokens": ("total_tokens",),
                "cache_read_input_tokens": ("cache_read_input_tokens",),
                "cache_creation_input_tokens": ("cache_creation_input_tokens",),
            },
        )
        if isinstance(usage, Mapping)
        else None,
        content_captured=any_content(inputs, outputs),
    )


def read_tool(span: Span, trace: TraceView) -> ToolExec | None:
    if span_type(span) != "TOOL":
        return None
    args = value(span, INPUTS)
    return ToolExec(
        span=span,
        name=span.name,
        arguments=args if args not in (None, "") else None,
        result=value(span, OUTPUTS),
        error=span_error(span),
    )


def detect(facts: TraceFacts) -> float:
    return 0.8 if TYPE in facts.keys else 0.0


CONVENTION = Convention(
    name=NAME,
    detect=detect,
    agent=read_agent,
    llm_call=read_llm_call,
    tool=read_tool,
    root_agent=read_root,
    markers=(TYPE.encode(),),
)
