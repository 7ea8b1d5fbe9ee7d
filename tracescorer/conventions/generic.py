"""The last resort: model calls read from spans no convention claims (label ``generic``).

A trace whose spans no convention recognises (an SDK not known yet, an app's own spans) may
still carry what a model was asked and answered. The registry asks this record only when no
convention gave runs (its ``detect`` never claims a trace): a span is a model call when it
carries a chat request — flattened ``llm.input_messages.{i}.*``, or a message list, a request
body or a prompt under a common key (``input.value``, ``input``, ``inputs``, ``gen_ai.prompt``,
``prompt``, ``messages``, ``request``, ``request_data``) — and either names a model
(``gen_ai.request.model``, ``llm.model_name``, ``model``, ...) or carries an assistant answer
(``llm.output_messages.{i}.*``, ``output.value``, ``output``, ``completion``, ``response``, ...).
A span naming a tool (``tool.name``, ``gen_ai.tool.name``, ``tool_name``) is a tool. The run is
the outermost span above the model calls, named after ``gen_ai.agent.name`` / ``agent.name``
when a span says one. Nothing else is guessed: without such spans the trace stays unmatched.
"""

from __future__ import annotations

from tracescorer.conventions import openinference
from tracescorer.conventions.base import (
    AgentInfo,
    Convention,
    LlmCall,
    ToolExec,
    TraceFacts,
    TraceView,
    span_error,
    whole,
)
from tracescorer.conventions.calls import request_messages, response_messages
from tracescorer.conventions.common import (
    ASSISTANT,
    any_content,
    first_str,
    genai_usage,
    parse_arguments,
    parse_result,
)
from tracescorer.model import Message, Span

NAME = "generic"
INPUT_KEYS = ("input.value", "input", "inputs", "gen_ai.prompt", "prompt", "messages", "request", "request_data")
OUTPUT_KEYS = ("output.value", "output", "outputs", "gen_ai.completion", "completion", "response", "response_data")
MODEL_KEYS = (
    "gen_ai.response.model",
    "gen_ai.request.model",
    "llm.model_name",
    "llm.response.model",
    "llm.request.model",
    "model",
    "model_name",
    "model_id",
)
TOOL_KEYS = ("gen_ai.tool.name", "tool.name", "tool_name")
_FLAT_IN, _FLAT_OUT = "llm.input_messages", "llm.output_messages"
_INPUT_SET = frozenset(INPUT_KEYS)


def claims(facts: TraceFacts) -> bool:
    """Whether a trace no convention recognised has keys a model call could be read from."""
    return bool(_INPUT_SET & facts.keys) or facts.has_prefix(_FLAT_IN + ".")


def _inputs(span: Span) -> list[Message]:
    attrs = span.attributes
    flat = openinference.flat_messages(attrs, _FLAT_IN) if any(k.startswith(_FLAT_IN) for k in attrs) else []
    if flat:
        return flat
    for key in INPUT_KEYS:
        if key in attrs:
            found = request_messages(attrs[key])
            if found:
                return found
    return []


def _outputs(span: Span) -> list[Message]:
    attrs = span.attributes
    flat = openinference.flat_messages(attrs, _FLAT_OUT) if any(k.startswith(_FLAT_OUT) for k in attrs) else []
    if flat:
        return [m for m in flat if m.role == ASSISTANT]
    for key in OUTPUT_KEYS:
        if key in attrs:
            found = [m for m in response_messages(attrs[key]) if m.role == ASSISTANT]
            if found:
                return found
    return []


def read_llm_call(span: Span, trace: TraceView) -> LlmCall | None:
    if first_str(span.attributes, *TOOL_KEYS) is not None:
        return None
    inputs = _inputs(span)
    if not inputs:
        return None
    model = first_str(span.attributes, *MODEL_KEYS)
    outputs = _outputs(span)
    if model is None and not outputs:
        return None  # a message list alone (an agent's or a chain's input) is no model call
    return LlmCall(
        span=span,
        input=inputs,
        output=outputs,
        model=model,
        usage=genai_usage(span.attributes),
        content_captured=any_content(inputs, outputs),
    )


def read_tool(span: Span, trace: TraceView) -> ToolExec | None:
    attrs = span.attributes
    name = first_str(attrs, *TOOL_KEYS)
    if name is None:
        return None
    args = next((attrs[k] for k in ("gen_ai.tool.call.arguments", *INPUT_KEYS) if k in attrs), None)
    result = next((attrs[k] for k in ("gen_ai.tool.call.result", *OUTPUT_KEYS) if k in attrs), None)
    return ToolExec(
        span=span,
        name=name,
        id=first_str(attrs, "gen_ai.tool.call.id", "tool_call.id", "tool.call_id"),
        arguments=parse_arguments(args),
        result=parse_result(result),
        error=span_error(span),
    )


def read_root(span: Span, trace: TraceView) -> AgentInfo | None:
    """The outermost span above the model calls: named when a span says the agent's name."""
    name = first_str(span.attributes, "gen_ai.agent.name", "agent.name")
    return AgentInfo(span=span, name=name) if name else None


def _never(facts: TraceFacts) -> float:
    return 0.0  # asked by the registry only when no convention gave runs: see claims()


CONVENTION = Convention(
    name=NAME,
    detect=_never,
    llm_call=read_llm_call,
    tool=read_tool,
    root_agent=read_root,
    markers=(*(whole(k) for k in INPUT_KEYS), _FLAT_IN.encode()),
)
