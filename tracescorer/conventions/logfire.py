"""Pydantic Logfire's instrumentation (``logfire.instrument_openai_agents()``,
``logfire.instrument_openai()``), exported over OTLP (``send_to_logfire=False``).

Logfire spans are named by their unformatted message template (``logfire.msg_template``;
``logfire.msg`` is the formatted text) and carry their arguments as plain attributes, JSON
encoded where structured:

- OpenAI Agents SDK: ``OpenAI Agents trace: {name}`` (the root; ``group_id`` = the conversation)
  > ``Task: Agent workflow`` > ``Agent run: {name!r}`` (the run; the agent name is the attribute
  ``name``) > ``Turn {turn} for agent ...`` > ``Chat completion with {gen_ai.request.model!r}``
  (``input`` = the chat messages sent, ``output`` = the assistant messages) or ``Responses API
  with {gen_ai.request.model!r}`` (``input`` = Responses items, ``events`` = GenAI events), and
  ``Function: {name}`` (``name``, ``input`` = arguments, ``output`` = result). An agent used as a
  tool runs inside its ``Function`` span: its own run.
- OpenAI client: ``Chat Completion with {request_data[model]!r}`` with ``request_data``
  (``{messages, model, tools}``) and ``response_data`` (``{message, usage}``); Logfire 5 writes
  the GenAI message attributes there instead (``request_data`` keeps only the model), read by
  :mod:`.genai`.

``gen_ai.system`` is set; ``gen_ai.operation.name`` is not. Runs are labelled ``logfire``.
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
    TOOL,
    any_content,
    as_str,
    first_str,
    genai_usage,
    loads_maybe,
    parse_arguments,
    parse_message,
    parse_messages,
    parse_result,
)
from tracescorer.model import Message, Span

NAME = "logfire"
TEMPLATE = "logfire.msg_template"
AGENT_RUN = "Agent run: {name!r}"
FUNCTION = "Function: {name}"
_LLM_TEMPLATES = ("Chat completion with ", "Responses API with ", "Chat Completion with ", "Completion with ")


def template(span: Span) -> str:
    value = span.attributes.get(TEMPLATE)
    return value if isinstance(value, str) else span.name


def _is_logfire(span: Span) -> bool:
    return span.scope.name.startswith("logfire") or "logfire.span_type" in span.attributes


# --- messages ---------------------------------------------------------------------------------


def responses_items(value: Any) -> list[Message]:
    """OpenAI Responses input items: messages, ``function_call`` and ``function_call_output``."""
    data = loads_maybe(value)
    if isinstance(data, str):
        data = [{"role": "user", "content": data}]
    out: list[Message] = []
    for item in data if isinstance(data, list) else ():
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        raw: Any = item
        if kind == "function_call":
            raw = {
                "role": ASSISTANT,
                "content": None,
                "tool_calls": [
                    {
                        "id": item.get("call_id", item.get("id")),
                        "function": {"name": item.get("name"), "arguments": item.get("arguments")},
                    }
                ],
            }
        elif kind == "function_call_output":
            raw = {"role": TOOL, "tool_call_id": item.get("call_id"), "content": item.get("output")}
        msg = parse_message(raw)
        if msg is not None and (msg.parts or msg.content):
            out.append(msg)
    return out


def _response_output(attrs: Mapping[str, Any]) -> list[Message]:
    output = loads_maybe(attrs.get("output"))
    if isinstance(output, list):
        msgs = (
            responses_items(output)
            if any(isinstance(o, Mapping) and o.get("type") in ("function_call", "message") for o in output)
            else parse_messages(output)
        )
        return [m for m in msgs if m.role == ASSISTANT]
    data = loads_maybe(attrs.get("response_data"))
    if isinstance(data, Mapping):
        message = data.get("message")
        if isinstance(message, Mapping):
            msg = parse_message({"role": ASSISTANT, **message})
            return [msg] if msg is not None and (msg.parts or msg.content) else []
        choices = data.get("choices")
        out = []
        for choice in choices if isinstance(choices, list) else ():
            if isinstance(choice, Mapping) and isinstance(choice.get("message"), Mapping):
                msg = parse_message({"role": ASSISTANT, **choice["message"]})
                if msg is not None and (msg.parts or msg.content):
                    out.append(msg)
        return out
    return []


def read_llm_call(span: Span, trace: TraceView) -> LlmCall | None:
    if not _is_logfire(span) or not template(span).startswith(_LLM_TEMPLATES):
        return None
    attrs = span.attributes
    if "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs:
        return None  # newer releases write the GenAI message attributes: the GenAI reader's
    responses = template(span).startswith("Responses API")
    inputs = responses_items(attrs.get("input")) if responses else parse_messages(attrs.get("input"))
    if not inputs:
        inputs = parse_messages(attrs.get("request_data"))
    outputs = _response_output(attrs)
    return LlmCall(
        span=span,
        input=inputs,
        output=outputs,
        model=first_str(attrs, "gen_ai.response.model", "gen_ai.request.model"),
        usage=genai_usage(attrs),
        content_captured=any_content(inputs, outputs),
    )


def read_tool(span: Span, trace: TraceView) -> ToolExec | None:
    if not _is_logfire(span) or template(span) != FUNCTION:
        return None
    attrs = span.attributes
    return ToolExec(
        span=span,
        name=first_str(attrs, "name") or span.name,
        arguments=parse_arguments(attrs.get("input")),
        result=parse_result(attrs.get("output")),
        error=span_error(span),
    )


def read_agent(span: Span, trace: TraceView) -> AgentInfo | None:
    if not _is_logfire(span) or template(span) != AGENT_RUN:
        return None
    # The conversation is the trace's group_id, set on the root span only.
    group = next(
        (
            as_str(a.attributes.get("group_id"))
            for a in trace.ancestors(span)
            if a.attributes.get("group_id") not in (None, "", "null")
        ),
        None,
    )
    return AgentInfo(span=span, name=first_str(span.attributes, "name"), conversation_id=group)


def detect(facts: TraceFacts) -> float:
    if facts.scope_startswith("logfire") or "logfire.span_type" in facts.keys:
        return 0.7
    return 0.0


CONVENTION = Convention(
    name=NAME, detect=detect, agent=read_agent, llm_call=read_llm_call, tool=read_tool, markers=(b"logfire",)
)
