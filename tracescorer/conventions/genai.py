"""OpenTelemetry GenAI semantic conventions: attributes, span events and log-record events.

Reads, on inference spans (``gen_ai.operation.name`` chat / text_completion / generate_content):
``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.system_instructions`` (JSON
strings or structured values), model and usage; when those are absent, the GenAI events tied
to the span — as span events or as OTLP log records with the same trace/span id:
``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message``,
``gen_ai.tool.message``, ``gen_ai.choice``, ``gen_ai.client.inference.operation.details`` and
the older ``gen_ai.content.prompt`` / ``gen_ai.content.completion`` span events.
Agent spans: ``invoke_agent`` with ``gen_ai.agent.name/id``, ``gen_ai.conversation.id`` — a
CLIENT span for a remote agent, an INTERNAL one (no ``gen_ai.agent.id``, ``gen_ai.agent.version``
nor ``gen_ai.provider.name`` since the conventions moved to ``semantic-conventions-genai``) for
an in-process agent; both are runs. ``invoke_workflow`` spans (a workflow above several agent
runs; named by ``gen_ai.workflow.name``, by ``gen_ai.agent.name`` in the newer form) are no run
while agents run below them: each agent run keeps its own identity and records its workflow
(:data:`WORKFLOW_NAME`, :data:`WORKFLOW_SPAN`); a workflow at the top of a trace with model calls
and no agent span is the run itself. ``plan`` spans are steps of their agent's run (the model call that plans is
below them), never model calls nor runs.
Tools: ``execute_tool`` with ``gen_ai.tool.name`` and ``gen_ai.tool.call.id/arguments/result``.
Instrumentations on semconv 1.36 or older keep their old form unless ``OTEL_SEMCONV_STABILITY_OPT_IN``
says otherwise, so one trace may hold both: every reader here reads both.
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
    whole,
)
from tracescorer.conventions.common import (
    ASSISTANT,
    SYSTEM,
    TOOL,
    USER,
    any_content,
    first_str,
    genai_usage,
    loads_maybe,
    parse_arguments,
    parse_message,
    parse_messages,
    parse_result,
    parse_system_instructions,
)
from tracescorer.model import Message, Span

NAME = "genai"

LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion", "responses"})
NON_LLM_OPERATIONS = frozenset(
    {"invoke_agent", "create_agent", "execute_tool", "embeddings", "invoke_workflow", "retrieval", "agent_step", "plan"}
)
WORKFLOW = "invoke_workflow"
#: run attributes naming the workflow a run was part of, and its span
WORKFLOW_NAME, WORKFLOW_SPAN = "gen_ai.workflow.name", "tracescorer.workflow_span_id"
INPUT_KEY, OUTPUT_KEY, SYSTEM_KEY = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
)

_MESSAGE_EVENTS = {
    "gen_ai.system.message": SYSTEM,
    "gen_ai.user.message": USER,
    "gen_ai.assistant.message": ASSISTANT,
    "gen_ai.tool.message": TOOL,
}
CHOICE_EVENT = "gen_ai.choice"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
EVENT_NAMES = frozenset(
    {*_MESSAGE_EVENTS, CHOICE_EVENT, DETAILS_EVENT, "gen_ai.content.prompt", "gen_ai.content.completion"}
)


def operation(span: Span) -> str:
    op = span.attributes.get("gen_ai.operation.name")
    return op if isinstance(op, str) else ""


def model_of(attrs: Mapping[str, Any]) -> str | None:
    return first_str(attrs, "gen_ai.response.model", "gen_ai.request.model")


# --- events -----------------------------------------------------------------------------------


def _events(span: Span, trace: TraceView) -> list[tuple[str, dict[str, Any]]]:
    """GenAI events of a span as (name, merged body + attributes), in time order."""
    found: list[tuple[int, int, str, dict[str, Any]]] = []
    for i, ev in enumerate(span.events):
        if ev.name in EVENT_NAMES:
            data = dict(ev.attributes)
            body = loads_maybe(data.pop("event.body", data.pop("body", None)))
            if isinstance(body, Mapping):
                data = {**body, **data}
            found.append((ev.time_unix_nano, i, ev.name, data))
    for i, rec in enumerate(trace.logs_for(span)):
        name = rec.name
        if name not in EVENT_NAMES:
            continue
        body = loads_maybe(rec.body)
        data = dict(rec.attributes)
        if isinstance(body, Mapping):
            data = {**data, **body}
        elif body is not None:
            data.setdefault("content", body)
        when = rec.time_unix_nano or rec.observed_time_unix_nano
        found.append((when, len(span.events) + i, name, data))
    found.sort(key=lambda f: (f[0], f[1]))
    return [(name, data) for _, _, name, data in found]


def _span_messages(span: Span, trace: TraceView) -> tuple[list[Message], list[Message], list[Message]]:
    """(input, system, output) from the message attributes, else from the GenAI events."""
    attrs = span.attributes
    given = parse_messages(attrs.get(INPUT_KEY))
    output = parse_messages(attrs.get(OUTPUT_KEY))
    system = parse_system_instructions(attrs.get(SYSTEM_KEY))
    if not (given or output or system):
        given, system, output = _from_events(span, trace)
    return given, system, output


def _from_events(span: Span, trace: TraceView) -> tuple[list[Message], list[Message], list[Message]]:
    """(input, system instructions, output) carried by the span's GenAI events."""
    inputs: list[Message] = []
    system: list[Message] = []
    outputs: list[Message] = []
    for name, data in _events(span, trace):
        if name in _MESSAGE_EVENTS:
            raw = {
                "role": data.get("role") or _MESSAGE_EVENTS[name],
                "content": loads_maybe(data.get("content")),
                "tool_calls": loads_maybe(data.get("tool_calls")),
            }
            if _MESSAGE_EVENTS[name] == TOOL:
                raw["tool_call_id"] = data.get("id", data.get("tool_call_id"))
            msg = parse_message(raw)
            if msg is not None:
                inputs.append(msg)
        elif name == CHOICE_EVENT:
            message = loads_maybe(data.get("message"))
            if not isinstance(message, Mapping):
                # Some emitters (Strands) put the content list itself under "message".
                message = {
                    "content": message if message is not None else loads_maybe(data.get("content")),
                    "tool_calls": loads_maybe(data.get("tool_calls")),
                }
            raw = {**message, "role": message.get("role") or ASSISTANT}
            raw.setdefault("finish_reason", data.get("finish_reason"))
            msg = parse_message(raw)
            if msg is not None:
                outputs.append(msg)
        elif name == DETAILS_EVENT:
            inputs.extend(parse_messages(data.get(INPUT_KEY)))
            outputs.extend(parse_messages(data.get(OUTPUT_KEY)))
            system.extend(parse_system_instructions(data.get(SYSTEM_KEY)))
        elif name == "gen_ai.content.prompt":
            inputs.extend(parse_messages(data.get("gen_ai.prompt")))
        elif name == "gen_ai.content.completion":
            outputs.extend(parse_messages(data.get("gen_ai.completion")))
    return inputs, system, outputs


# --- readers ----------------------------------------------------------------------------------


def read_llm_call(span: Span, trace: TraceView) -> LlmCall | None:
    attrs = span.attributes
    op = operation(span)
    has_attrs = INPUT_KEY in attrs or OUTPUT_KEY in attrs
    if op in NON_LLM_OPERATIONS:
        return None
    if op and op not in LLM_OPERATIONS and not has_attrs:
        return None  # another operation (a framework's loop or task span) repeating the events
    if op not in LLM_OPERATIONS and not has_attrs:
        has_events = any(ev.name in EVENT_NAMES for ev in span.events) or any(
            r.name in EVENT_NAMES for r in trace.logs_for(span)
        )
        if not has_events:
            return None
    inputs, system, outputs = _span_messages(span, trace)
    return LlmCall(
        span=span,
        input=inputs,
        system=system,
        output=[m for m in outputs if m.role == ASSISTANT],
        model=model_of(attrs),
        usage=genai_usage(attrs),
        content_captured=any_content(inputs, outputs, system),
    )


def read_tool(span: Span, trace: TraceView) -> ToolExec | None:
    attrs = span.attributes
    if operation(span) != "execute_tool" and not (
        "gen_ai.tool.call.arguments" in attrs or "gen_ai.tool.call.result" in attrs
    ):
        return None
    name = first_str(attrs, "gen_ai.tool.name")
    if name is None and span.name.startswith("execute_tool "):
        name = span.name[len("execute_tool ") :]
    return ToolExec(
        span=span,
        name=name or span.name,
        id=first_str(attrs, "gen_ai.tool.call.id"),
        arguments=parse_arguments(attrs.get("gen_ai.tool.call.arguments")),
        result=parse_result(attrs.get("gen_ai.tool.call.result")),
        error=span_error(span),
    )


def is_agent_span(span: Span) -> bool:
    op = operation(span)
    return op == "invoke_agent" or (not op and span.name.startswith("invoke_agent"))


def _workflow_name(span: Span) -> str | None:
    name = first_str(span.attributes, "gen_ai.workflow.name", "gen_ai.agent.name")
    if name is None and span.name.startswith(WORKFLOW + " "):
        name = span.name[len(WORKFLOW) + 1 :].strip() or None
    return name


def _workflow_attributes(workflow: Span) -> dict[str, Any]:
    name = _workflow_name(workflow)
    return {WORKFLOW_NAME: name, WORKFLOW_SPAN: workflow.span_id} if name else {WORKFLOW_SPAN: workflow.span_id}


def _workflow_of(span: Span, trace: TraceView) -> dict[str, Any]:
    """The run attributes naming the nearest workflow above ``span`` (none: empty)."""
    for anc in trace.ancestors(span):
        if operation(anc) == WORKFLOW:
            return _workflow_attributes(anc)
    return {}


def read_agent(span: Span, trace: TraceView) -> AgentInfo | None:
    if not is_agent_span(span):
        return None
    attrs = span.attributes
    name = first_str(attrs, "gen_ai.agent.name")
    if name is None and span.name.startswith("invoke_agent "):
        name = span.name[len("invoke_agent ") :].strip() or None
    given, system, output = _span_messages(span, trace)
    return AgentInfo(
        span=span,
        name=name,
        id=first_str(attrs, "gen_ai.agent.id"),
        conversation_id=first_str(attrs, "gen_ai.conversation.id"),
        model=model_of(attrs),
        system=system,
        given=given,
        output=output,
        usage=genai_usage(attrs),
        attributes=_workflow_of(span, trace),
    )


def read_workflow(span: Span, trace: TraceView) -> AgentInfo | None:
    """An ``invoke_workflow`` span that is the run: model calls below it and no agent span."""
    if operation(span) != WORKFLOW:
        return None
    given, system, output = _span_messages(span, trace)
    return AgentInfo(
        span=span,
        name=_workflow_name(span),
        conversation_id=first_str(span.attributes, "gen_ai.conversation.id"),
        system=system,
        given=given,
        output=output,
        attributes=_workflow_attributes(span),
    )


# --- record -----------------------------------------------------------------------------------


def detect(facts: TraceFacts) -> float:
    if INPUT_KEY in facts.keys or OUTPUT_KEY in facts.keys or facts.event_names & EVENT_NAMES:
        return 0.5
    if (
        facts.operations & LLM_OPERATIONS
        or "invoke_agent" in facts.operations
        or any(n.startswith("invoke_agent") for n in facts.span_names)
    ):
        return 0.4
    return 0.2 if "gen_ai" in facts.namespaces else 0.0


CONVENTION = Convention(
    name=NAME,
    detect=detect,
    agent=read_agent,
    llm_call=read_llm_call,
    tool=read_tool,
    root_agent=read_workflow,
    # a key "gen_ai" alone (a map attribute) puts the trace in the namespace too
    markers=(b"gen_ai.", whole("gen_ai"), b"invoke_agent"),
)
