"""LiteLLM's own OpenTelemetry callback (``litellm.callbacks = ["otel"]``; scope ``litellm``).

Per completion call LiteLLM writes GenAI keys — ``gen_ai.input.messages`` /
``gen_ai.output.messages`` in its own variant of the parts format (OpenAI ``tool_calls`` and
``tool_call_id`` beside ``parts``; an assistant turn that only calls tools has empty ``parts``
and its calls only in ``gen_ai.completion.{i}.function_call.name|arguments``, without ids) —
plus ``litellm.*`` keys (``litellm.call_id``, ``litellm.provider.model``). Where it writes them
depends on the context:

- no span active: a ``litellm_request`` span of its own (a trace per call), with a
  ``raw_gen_ai_request`` child;
- an application span active (the app's own, or another framework's): onto *that* span,
  every call of it overwriting the previous call's keys (keys the later call does not write,
  such as a tool call's, stay from the earlier one), each call a ``raw_gen_ai_request`` child.

``raw_gen_ai_request`` (named after ``metadata.generation_name`` when one is given) carries the
provider's raw request and response as ``llm.<provider>.<field>``: ``messages``, ``tools``,
``system`` (Anthropic), ``choices`` / ``content`` (the response), ``usage``, ``model`` —
values that are not text are Python reprs (``str(value)``), read with :mod:`.pyrepr`. Those
spans are the model calls: the one record of each call. A span LiteLLM wrote onto holds the
last call's keys mixed with stale ones, so it is never read as a model call when raw children
exist; it is the run (the application's span, named after itself). The semantic-convention
mode (``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``: ``chat <model>`` spans, no
raw span) is plain GenAI, read by :mod:`.genai`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracescorer.conventions import genai, pyrepr
from tracescorer.conventions.base import (
    NOT_ONE,
    AgentInfo,
    Convention,
    LlmCall,
    NotOne,
    TraceFacts,
    TraceView,
)
from tracescorer.conventions.calls import is_message_list
from tracescorer.conventions.common import (
    ASSISTANT,
    SYSTEM,
    any_content,
    genai_usage,
    indexed,
    loads_maybe,
    parse_message,
    parse_messages,
    text_message,
    usage_from,
)
from tracescorer.model import Message, Span

NAME = "litellm"
SCOPE = "litellm"
RAW_SPAN = "raw_gen_ai_request"
CALL_ID = "litellm.call_id"
_REQUEST_FIELDS = ("messages", "contents", "input", "prompt")


def _provider_prefix(span: Span) -> str | None:
    """``llm.<provider>.`` of a raw request span: the prefix its ``messages`` key has."""
    for key in span.attributes:
        if key.startswith("llm.") and key.endswith(_REQUEST_FIELDS) and key.count(".") == 2:
            return key[: key.rindex(".") + 1]
    return None


def _raw_value(value: Any) -> Any:
    """A raw attribute: JSON, else a Python repr (LiteLLM's ``str(value)``), else the text."""
    data = loads_maybe(value)
    if isinstance(data, str) and data[:1] in ("[", "{", "("):
        try:
            return pyrepr.parse(data)
        except pyrepr.ReprError:
            return data
    return data


def _is_raw(span: Span) -> bool:
    return span.scope.name == SCOPE and CALL_ID not in span.attributes and _provider_prefix(span) is not None


def _read_raw(span: Span, prefix: str) -> LlmCall:
    attrs = span.attributes

    def field(name: str) -> Any:
        return _raw_value(attrs.get(prefix + name))

    messages = field("messages")
    inputs = parse_messages(messages) if is_message_list(messages) else []
    system = field("system")  # Anthropic Messages: the system prompt beside the messages
    if isinstance(system, str) and system:
        inputs.insert(0, text_message(SYSTEM, system))
    elif is_message_list(system) or isinstance(system, list):
        text = "\n".join(b.get("text", "") for b in system if isinstance(b, Mapping) and isinstance(b.get("text"), str))
        if text:
            inputs.insert(0, text_message(SYSTEM, text))
    outputs: list[Message] = []
    choices = field("choices")
    if isinstance(choices, list):
        for choice in choices:
            message = choice.get("message") if isinstance(choice, Mapping) else None
            msg = parse_message({**message, "role": ASSISTANT}) if isinstance(message, Mapping) else None
            if msg is not None and (msg.parts or msg.content):
                outputs.append(msg)
    content = field("content")
    if not outputs and isinstance(content, list):  # Anthropic Messages: content blocks
        msg = parse_message({"role": ASSISTANT, "content": content})
        if msg is not None and (msg.parts or msg.content):
            outputs.append(msg)
    usage = field("usage")
    model = field("model")
    return LlmCall(
        span=span,
        input=inputs,
        output=outputs,
        model=model if isinstance(model, str) and model else None,
        usage=usage_from(
            usage,
            {
                "input_tokens": ("prompt_tokens", "input_tokens"),
                "output_tokens": ("completion_tokens", "output_tokens"),
                "total_tokens": ("total_tokens",),
            },
        )
        if isinstance(usage, Mapping)
        else None,
        content_captured=any_content(inputs, outputs),
    )


def _completion_tool_calls(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``gen_ai.completion.{i}.function_call.name|arguments``: the only record of the tool
    calls of an assistant turn (no ids)."""
    return [
        {"function": {"name": c["function_call.name"], "arguments": c.get("function_call.arguments")}}
        for c in indexed(attrs, "gen_ai.completion")
        if isinstance(c.get("function_call.name"), str)
    ]


def _read_request_span(span: Span) -> LlmCall:
    """A span LiteLLM wrote its GenAI keys on (its ``litellm_request``, or the app's span)."""
    attrs = span.attributes
    inputs = parse_messages(attrs.get(genai.INPUT_KEY))
    outputs = [m for m in parse_messages(attrs.get(genai.OUTPUT_KEY)) if m.role == ASSISTANT]
    calls = _completion_tool_calls(attrs)
    # The keys stay from an earlier call on an app span: they are this call's only when it
    # answered with nothing but tool calls.
    if calls and not any(m.tool_calls or m.content for m in outputs):
        msg = parse_message({"role": ASSISTANT, "content": "", "tool_calls": calls})
        outputs = [msg] if msg is not None else outputs
    system = loads_maybe(attrs.get(genai.SYSTEM_KEY))
    if isinstance(system, str) and system:
        inputs.insert(0, text_message(SYSTEM, system))
    return LlmCall(
        span=span,
        input=inputs,
        output=outputs,
        model=genai.model_of(attrs),
        usage=genai_usage(attrs),
        content_captured=any_content(inputs, outputs),
    )


def _raw_children(span: Span, trace: TraceView) -> bool:
    return any(_is_raw(c) for c in trace.children.get(span.span_id, ()))


def read_llm_call(span: Span, trace: TraceView) -> LlmCall | NotOne | None:
    attrs = span.attributes
    if span.scope.name == SCOPE and CALL_ID not in attrs:
        prefix = _provider_prefix(span)
        return _read_raw(span, prefix) if prefix is not None else None
    if CALL_ID not in attrs:
        return None
    if span.scope.name != SCOPE and _raw_children(span, trace):
        return NOT_ONE  # an application span: the last call's keys and stale ones; its children tell
    return _read_request_span(span)


def read_root(span: Span, trace: TraceView) -> AgentInfo | None:
    """The application's span above LiteLLM's (the one it wrote its keys on, or the parent of
    its ``litellm_request`` with ``USE_OTEL_LITELLM_REQUEST_SPAN``): the run, named after it."""
    if span.scope.name == SCOPE:
        return None
    return AgentInfo(span=span, name=span.name or None)


def detect(facts: TraceFacts) -> float:
    return 0.65 if SCOPE in facts.scopes or CALL_ID in facts.keys else 0.0


CONVENTION = Convention(
    name=NAME, label=genai.NAME, detect=detect, llm_call=read_llm_call, root_agent=read_root, markers=(SCOPE.encode(),)
)
