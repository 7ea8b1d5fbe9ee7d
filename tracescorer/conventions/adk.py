"""Google ADK (scope ``gcp.vertex.agent``): an extension of the GenAI convention.

ADK's spans are ``invocation`` > ``invoke_agent <agent>`` (``gen_ai.agent.name``,
``gen_ai.conversation.id`` = the ADK session id) > model calls and ``execute_tool <tool>``.

- **Legacy telemetry schema** (``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1``, and ADK 1.x): each model
  call is two spans, ``call_llm`` with the content as JSON — ``gcp.vertex.agent.llm_request``
  (``{model, config: {system_instruction, tools}, contents: [google.genai Content]}``) and
  ``gcp.vertex.agent.llm_response`` (``{content, usage_metadata, ...}``) — around a
  ``generate_content`` span with the usage; tools carry ``gcp.vertex.agent.tool_call_args`` /
  ``gcp.vertex.agent.tool_response``. Content parts are google.genai parts: ``text``,
  ``function_call`` {id, name, args}, ``function_response`` {id, name, response},
  ``inline_data``, ``file_data``, ``thought`` (snake_case, or camelCase when dumped by alias).
- **Semconv-aligned schema** (the default of ADK 2): ``gen_ai.input.messages`` /
  ``gen_ai.output.messages`` / ``gen_ai.system_instructions`` on ``generate_content`` spans,
  ``gen_ai.tool.call.arguments|result`` on tools — read by :mod:`.genai`.

In both, the system message is the instruction as the model received it, with the identity
paragraph ADK appends to the app's instruction (``You are an agent. Your internal name is
"<name>".`` and, with a description, ``The description about you is "..."``): a run shows what
the model was given. ADK wraps a function tool's return value as ``{"result": value}``: the
result is ``value``. An ``AgentTool`` sub-agent runs in its own session (a fresh id): its run
keeps that conversation id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracescorer.conventions import genai
from tracescorer.conventions.base import Convention, LlmCall, ToolExec, TraceFacts, TraceView, span_error
from tracescorer.conventions.common import (
    ASSISTANT,
    SYSTEM,
    any_content,
    as_str,
    first_str,
    genai_usage,
    loads_maybe,
    parse_arguments,
    parse_message,
    parse_result,
    text_message,
    usage_from,
)
from tracescorer.model import Message, Part, Span

NAME = "adk"
SCOPE = "gcp.vertex.agent"
REQUEST, RESPONSE = "gcp.vertex.agent.llm_request", "gcp.vertex.agent.llm_response"
TOOL_ARGS, TOOL_RESPONSE = "gcp.vertex.agent.tool_call_args", "gcp.vertex.agent.tool_response"


def unwrap_result(value: Any) -> Any:
    """ADK's ``{"result": value}`` wrapping of a function tool's return value, removed."""
    data = loads_maybe(value)
    if isinstance(data, Mapping) and len(data) == 1 and "result" in data:
        return data["result"]
    return data


# --- google.genai parts -----------------------------------------------------------------------


def _function_call(raw: Mapping[str, Any]) -> Part | None:
    call = raw.get("function_call", raw.get("functionCall"))
    if not isinstance(call, Mapping):
        return None
    return Part(
        type="tool_call",
        id=as_str(call.get("id")),
        name=as_str(call.get("name")),
        arguments=parse_arguments(call.get("args")),
    )


def _function_response(raw: Mapping[str, Any]) -> Part | None:
    resp = raw.get("function_response", raw.get("functionResponse"))
    if not isinstance(resp, Mapping):
        return None
    return Part(
        type="tool_call_response",
        id=as_str(resp.get("id")),
        name=as_str(resp.get("name")),
        response=unwrap_result(parse_result(resp.get("response"))),
    )


def _thought(raw: Mapping[str, Any]) -> Part | None:
    if raw.get("thought") is True and isinstance(raw.get("text"), str):
        return Part(type="reasoning", content=raw["text"])
    text = raw.get("text")
    return Part(type="text", content=text if isinstance(text, str) else None)


def _data(kind: str) -> Any:
    def parse(raw: Mapping[str, Any]) -> Part:
        data = raw.get(kind, raw.get(kind.replace("_d", "D")))
        meta = dict(data) if isinstance(data, Mapping) else {}
        return Part(type="blob" if kind == "inline_data" else "uri", extra=meta)

    return parse


def _contents(value: Any) -> list[Message]:
    """google.genai ``Content`` dicts (``{role: user|model, parts: [...]}``) as messages."""
    out = []
    for raw in value if isinstance(value, list) else ():
        msg = parse_message(raw)
        if msg is not None and (msg.parts or msg.content):
            out.append(msg)
    return out


def _system_instruction(value: Any) -> list[Message]:
    """``config.system_instruction`` as sent: a string or a google.genai ``Content``."""
    if isinstance(value, str):
        return [text_message(SYSTEM, value)] if value.strip() else []
    if isinstance(value, Mapping):  # a Content
        msg = parse_message({**value, "role": SYSTEM})
        return [msg] if msg is not None and msg.content else []
    return []


# --- readers ----------------------------------------------------------------------------------


def read_llm_call(span: Span, trace: TraceView) -> LlmCall | None:
    if span.scope.name != SCOPE:
        return None
    attrs = span.attributes
    request = loads_maybe(attrs.get(REQUEST))
    if not (isinstance(request, Mapping) and request):
        return genai.read_llm_call(span, trace)  # the semconv-aligned schema
    config = request.get("config")
    system = _system_instruction(config.get("system_instruction")) if isinstance(config, Mapping) else []
    response = loads_maybe(attrs.get(RESPONSE))
    response = response if isinstance(response, Mapping) else {}
    content = response.get("content")
    output: list[Message] = []
    if isinstance(content, Mapping):
        msg = parse_message({**content, "role": ASSISTANT})
        if msg is not None and (msg.parts or msg.content):
            output = [msg]
    inputs = _contents(request.get("contents"))
    usage = genai_usage(attrs)
    meta = response.get("usage_metadata")
    if usage is None and isinstance(meta, Mapping):
        usage = usage_from(
            meta,
            {
                "input_tokens": ("prompt_token_count",),
                "output_tokens": ("candidates_token_count",),
                "total_tokens": ("total_token_count",),
            },
        )
    return LlmCall(
        span=span,
        input=inputs,
        system=system,
        output=output,
        model=first_str(response, "model_version")
        or first_str(attrs, "gen_ai.request.model")
        or as_str(request.get("model")),
        usage=usage,
        content_captured=any_content(inputs, output, system),
    )


def read_tool(span: Span, trace: TraceView) -> ToolExec | None:
    if span.scope.name != SCOPE or genai.operation(span) != "execute_tool":
        return None
    attrs = span.attributes
    args = attrs.get("gen_ai.tool.call.arguments", attrs.get(TOOL_ARGS))
    result = attrs.get("gen_ai.tool.call.result", attrs.get(TOOL_RESPONSE))
    return ToolExec(
        span=span,
        name=first_str(attrs, "gen_ai.tool.name") or span.name.removeprefix("execute_tool "),
        id=first_str(attrs, "gen_ai.tool.call.id"),
        arguments=parse_arguments(args),
        result=unwrap_result(result) if result not in (None, "") else None,
        error=span_error(span),
    )


def detect(facts: TraceFacts) -> float:
    return 0.55 if SCOPE in facts.scopes or REQUEST in facts.keys else 0.0


CONVENTION = Convention(
    name=NAME,
    label=genai.NAME,
    detect=detect,
    llm_call=read_llm_call,
    tool=read_tool,
    keyed_parts={
        "function_call": _function_call,
        "functionCall": _function_call,
        "function_response": _function_response,
        "functionResponse": _function_response,
        "thought": _thought,
        "inline_data": _data("inline_data"),
        "inlineData": _data("inline_data"),
        "file_data": _data("file_data"),
        "fileData": _data("file_data"),
    },
    markers=(SCOPE.encode(),),
)
