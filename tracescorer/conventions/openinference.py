"""OpenInference (Arize Phoenix and its instrumentors).

Model calls: spans with ``openinference.span.kind`` = LLM and flattened messages
``llm.input_messages.{i}.message.role|content|name|tool_call_id``,
``...message.contents.{j}.message_content.type|text``,
``...message.tool_calls.{k}.tool_call.id|function.name|function.arguments`` (same under
``llm.output_messages``; indices may have gaps); without them, an OpenAI-style request/response
in ``input.value`` / ``output.value``. ``llm.model_name``, ``llm.token_count.*``.
Agents: AGENT spans; the name is ``agent.name`` or the span name. A zero-length AGENT span with
no children and no conversation of its own is a framework event's record, not an agent (BeeAI).
An AGENT span without ``agent.name`` may be a wrapper (the OpenAI Agents SDK's workflow span), a
LangGraph node marked AGENT (``metadata.langgraph_node`` = its name) is a node of its graph:
:mod:`.nesting` decides.
Without AGENT spans the run's top CHAIN span names the agent (LangGraph's graph name). ``input.value`` counts as the new input only when it is plain text or messages
(decorators record Python call arguments as JSON, which is not a message).
Tools: TOOL spans, ``tool.name``, ``input.value`` (arguments), ``output.value`` (result).
Conversation: ``session.id``; user: ``user.id``.
Hidden content (``TraceConfig(hide_inputs=..., hide_outputs=..., hide_input_text=...)``): values
replaced by OpenInference's ``REDACTED_VALUE`` (``"__REDACTED__"``) are content not captured, never
text or tool arguments; masked message texts keep the message's structure without text.
"""

from __future__ import annotations

import re
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
from tracescorer.conventions.common import (
    ASSISTANT,
    USER,
    any_content,
    first_str,
    indexed,
    loads_maybe,
    output_from_text,
    parse_arguments,
    parse_message,
    parse_messages,
    parse_result,
    text_message,
    unwrap_tool_output,
    usage_from,
)
from tracescorer.model import Message, Span

NAME = "openinference"
KIND = "openinference.span.kind"
#: ``openinference.instrumentation.REDACTED_VALUE``: what ``TraceConfig`` writes in place of
#: a hidden ``input.value`` / ``output.value``, message text or image URL.
REDACTED = "__REDACTED__"


def _shown(value: Any) -> Any:
    """``value``, or None where OpenInference masked it (content not captured)."""
    return None if isinstance(value, str) and value.strip() == REDACTED else value


def _value(attrs: Mapping[str, Any], key: str) -> Any:
    return _shown(attrs.get(key))


def kind(span: Span) -> str:
    value = span.attributes.get(KIND)
    return value.upper() if isinstance(value, str) else ""


def flat_messages(attrs: Mapping[str, Any], prefix: str) -> list[Message]:
    """Flattened ``<prefix>.{i}.message.*`` messages (indices may have gaps)."""
    out = []
    for entry in indexed(attrs, prefix):
        raw: dict[str, Any] = {"role": entry.get("message.role") or ASSISTANT}
        contents = indexed(entry, "message.contents")
        if contents:
            raw["content"] = [
                {
                    "type": c.get("message_content.type") or "text",
                    "text": _shown(c.get("message_content.text")),
                    **({"url": url} if (url := _shown(c.get("message_content.image.image.url"))) is not None else {}),
                }
                for c in contents
            ]
        elif _shown(entry.get("message.content")) is None and entry.get("message.content") is not None:
            raw["content"] = [{"type": "text"}]  # hidden text: the turn is there, its text is not
        else:
            raw["content"] = entry.get("message.content")
        calls = indexed(entry, "message.tool_calls")
        if calls:
            raw["tool_calls"] = [
                {
                    "id": c.get("tool_call.id"),
                    "function": {
                        "name": c.get("tool_call.function.name"),
                        "arguments": _shown(c.get("tool_call.function.arguments")),
                    },
                }
                for c in calls
            ]
        for key in ("name", "tool_call_id"):
            if "message." + key in entry:
                raw[key] = entry["message." + key]
        msg = parse_message(raw)
        if msg is not None and (msg.parts or msg.content):
            out.append(msg)
    return out


def _response_messages(value: Any) -> list[Message]:
    """Assistant messages of an OpenAI-style response body (``choices[].message``)."""
    data = loads_maybe(value)
    if isinstance(data, Mapping) and isinstance(data.get("choices"), list):
        out = []
        for choice in data["choices"]:
            if isinstance(choice, Mapping) and isinstance(choice.get("message"), Mapping):
                msg = parse_message({"role": ASSISTANT, **choice["message"]})
                if msg is not None and (msg.parts or msg.content):
                    out.append(msg)
        return out
    return output_from_text(data) if isinstance(data, (str, Mapping)) else []


def read_llm_call(span: Span, trace: TraceView) -> LlmCall | None:
    if kind(span) != "LLM":
        return None
    attrs = span.attributes
    inputs = flat_messages(attrs, "llm.input_messages")
    outputs = flat_messages(attrs, "llm.output_messages")
    if not inputs:
        inputs = parse_messages(_value(attrs, "input.value"))
    if not outputs and _value(attrs, "output.value") is not None:
        outputs = _response_messages(attrs["output.value"])
    return LlmCall(
        span=span,
        input=inputs,
        output=[m for m in outputs if m.role == ASSISTANT],
        model=first_str(attrs, "llm.model_name"),
        usage=usage_from(
            attrs,
            {
                "input_tokens": ("llm.token_count.prompt",),
                "output_tokens": ("llm.token_count.completion",),
                "total_tokens": ("llm.token_count.total",),
                "cache_read_input_tokens": ("llm.token_count.prompt_details.cache_read",),
                "reasoning_tokens": ("llm.token_count.completion_details.reasoning",),
            },
        ),
        content_captured=any_content(inputs, outputs),
    )


def read_tool(span: Span, trace: TraceView) -> ToolExec | None:
    if kind(span) != "TOOL":
        return None
    attrs = span.attributes
    # Frameworks' tool outputs (a LangChain ToolMessage, ...) name the call they answer.
    result, call_id = unwrap_tool_output(parse_result(_value(attrs, "output.value")))
    return ToolExec(
        span=span,
        name=first_str(attrs, "tool.name") or span.name,
        id=first_str(attrs, "tool_call.id", "tool.call_id", "gen_ai.tool.call.id") or call_id,
        arguments=parse_arguments(_value(attrs, "input.value")),
        result=result,
        error=span_error(span),
    )


def _agent_name(span: Span) -> str:
    return first_str(span.attributes, "agent.name", "gen_ai.agent.name") or span.name


def _is_text(attrs: Mapping[str, Any], key: str) -> bool:
    mime = attrs.get(key + ".mime_type")
    value = _value(attrs, key)
    if not isinstance(value, str) or not value:
        return False
    if mime == "text/plain":
        return True
    return mime is None and loads_maybe(value) is value


def _graph_node(span: Span) -> bool:
    """A LangGraph node (``metadata.langgraph_node`` is the span's own name): part of its graph."""
    attrs = span.attributes
    meta = attrs.get("metadata")
    if not isinstance(meta, str) or "langgraph_node" not in meta:
        return False
    data = loads_maybe(meta)
    return isinstance(data, Mapping) and data.get("langgraph_node") == span.name


def _agent_info(span: Span, name: str | None) -> AgentInfo:
    attrs = span.attributes
    new_input: list[Message] = []
    given: list[Message] = []
    if _is_text(attrs, "input.value"):
        new_input = [text_message(USER, attrs["input.value"])]
    else:
        given = parse_messages(_value(attrs, "input.value"))
    output: list[Message] = []
    if _is_text(attrs, "output.value"):
        output = [text_message(ASSISTANT, attrs["output.value"])]
    elif _value(attrs, "output.value") is not None:
        output = [m for m in parse_messages(attrs["output.value"]) if m.role == ASSISTANT]
    return AgentInfo(
        span=span,
        name=name,
        conversation_id=first_str(attrs, "session.id"),
        resource_id=first_str(attrs, "user.id"),
        model=first_str(attrs, "llm.model_name"),
        new_input=new_input,
        given=given,
        output=output,
    )


def helper_span(span: Span, trace: TraceView) -> bool:
    """A zero-length AGENT span with nothing below it and no conversation of its own: a record of
    a framework event (BeeAI's instrumentation gives each event of an agent, such as its
    ``final_answer``, a child span of the agent's kind), not an agent invocation."""
    attrs = span.attributes
    return (
        span.end_time_unix_nano <= span.start_time_unix_nano
        and not trace.children.get(span.span_id)
        and not _is_text(attrs, "input.value")
        and _value(attrs, "output.value") is None
    )


def read_agent(span: Span, trace: TraceView) -> AgentInfo | NotOne | None:
    if kind(span) != "AGENT":
        return None
    if helper_span(span, trace):
        return NOT_ONE
    info = _agent_info(span, _agent_name(span))
    # Without agent.name the span may only wrap the agent (a workflow span); a graph node
    # marked AGENT is a step of its graph. The nesting rules decide (see .nesting).
    info.wrapper = first_str(span.attributes, "agent.name", "gen_ai.agent.name") is None
    info.graph_node = _graph_node(span)
    return info


def scoped_agent(span: Span, trace: TraceView, scope: str) -> AgentInfo | NotOne | None:
    """An AGENT span of the instrumentation ``scope`` as :func:`read_agent` reads it (for the
    extensions of one framework's instrumentation, which then name the agent their way)."""
    if span.scope.name != scope or kind(span) != "AGENT":
        return None
    return read_agent(span, trace)


#: Span names of auto-instrumented methods (``FunctionAgent.run``, ``Pipeline.run``): not names.
_METHOD_NAME = re.compile(r"^[A-Z][A-Za-z0-9_]*\.[a-z_][A-Za-z0-9_]*$")


def read_root(span: Span, trace: TraceView) -> AgentInfo | None:
    """A CHAIN (or AGENT) span that is the run without an agent span above its model calls: the
    agent is named after it (LangGraph's graph, LangGraph.js ``createReactAgent``), unless its
    name is only an instrumented method's."""
    if kind(span) not in ("CHAIN", "AGENT"):
        return None
    name = first_str(span.attributes, "agent.name", "gen_ai.agent.name") or (
        None if _METHOD_NAME.match(span.name) else span.name or None
    )
    return _agent_info(span, name)


def detect(facts: TraceFacts) -> float:
    return 0.8 if KIND in facts.keys else 0.0


CONVENTION = Convention(
    name=NAME,
    detect=detect,
    agent=read_agent,
    llm_call=read_llm_call,
    tool=read_tool,
    root_agent=read_root,
    markers=(KIND.encode(),),
)
