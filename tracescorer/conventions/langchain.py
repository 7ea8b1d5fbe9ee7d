"""LangChain / LangGraph: its serialised objects, and Traceloop's ``opentelemetry-instrumentation-
langchain`` form (an extension of :mod:`.openllmetry`; runs labelled ``openllmetry``).

LangChain objects reach the spans serialised, whatever the instrumentation:
``{"lc": 1, "type": "constructor", "id": [..., "HumanMessage"], "kwargs": {content, tool_calls,
tool_call_id, name, ...}}`` (``dumpd``, also LangChain.js), ``{"type": "human", "data":
{...}}`` (``message_to_dict``) and the flat ``model_dump`` (``{"type": "ai", "content", "tool_calls",
...}``, LangSmith's inputs and outputs). A tool's output is its ``ToolMessage``, sometimes inside
``{"output": ...}``; the result is the message's content. These shapes are registered for every
convention (OpenInference's LangChain instrumentations write them too).

Traceloop's LangChain instrumentation, for a LangGraph graph: the root ``invoke_agent <graph>``
(``gen_ai.agent.name``, ``gen_ai.conversation.id`` = the thread) wraps ``<graph>.workflow``
(``traceloop.span.kind=workflow``, ``gen_ai.operation.name=invoke_agent``, the same name): one
invocation (the same-name rule of :mod:`.nesting` merges them). Graph nodes are ``execute_task``
spans; model calls are ``<Model>.chat`` spans with GenAI message attributes; tools are
``execute_tool`` spans whose ``gen_ai.tool.call.arguments`` holds the whole callback payload
(``{"input_str": "<python repr of the arguments>", "tags", "metadata", ...}``) and whose result
is the serialised ``ToolMessage``. A graph invoked inside a tool is recorded as an empty
``invoke_agent <name>`` span *beside* the ``execute_task <name>`` span that holds the graph's run:
that task is the nested run's work. Building a graph emits a separate trace with only a
``create_agent`` span: an agent defined, not run.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from tracescorer.conventions import genai, openllmetry
from tracescorer.conventions.base import (
    NOT_ONE,
    AgentInfo,
    Convention,
    NotOne,
    ToolExec,
    TraceFacts,
    TraceView,
    span_error,
)
from tracescorer.conventions.common import (
    ASSISTANT,
    first_str,
    loads_maybe,
    parse_arguments,
    unwrap_tool_output,
)
from tracescorer.model import Span

NAME = "langchain"
_ROLES = {
    "HumanMessage": "user",
    "AIMessage": ASSISTANT,
    "SystemMessage": "system",
    "ToolMessage": "tool",
    "FunctionMessage": "tool",
    "ChatMessage": None,
    "AIMessageChunk": ASSISTANT,
    "HumanMessageChunk": "user",
    "ToolMessageChunk": "tool",
}
_TYPES = {"human": "user", "ai": ASSISTANT, "system": "system", "tool": "tool", "function": "tool"}


# --- serialised LangChain messages -------------------------------------------------------------


def _lc_constructor(raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``dumpd`` form: ``{"lc": 1, "type": "constructor", "id": [..., "<Class>"], "kwargs": {...}}``."""
    ids, kwargs = raw.get("id"), raw.get("kwargs")
    if raw.get("type") != "constructor" or not isinstance(ids, list) or not ids or not isinstance(kwargs, Mapping):
        return None
    role = _ROLES.get(str(ids[-1])) or _TYPES.get(str(kwargs.get("type"))) or kwargs.get("role")
    return _normal(kwargs, role) if role else None


def _lc_data(raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``message_to_dict`` form: ``{"type": "human"|"ai"|"tool"|..., "data": {...}}``."""
    data = raw.get("data")
    role = _TYPES.get(str(raw.get("type")))
    return _normal(data, role) if role and isinstance(data, Mapping) else None


def _normal(kwargs: Mapping[str, Any], role: str) -> Mapping[str, Any]:
    out: dict[str, Any] = {"role": role, "content": kwargs.get("content")}
    for key in ("tool_calls", "tool_call_id", "name"):
        if kwargs.get(key) not in (None, [], ""):
            out[key] = kwargs[key]
    if role == ASSISTANT and not out.get("tool_calls"):
        extra = kwargs.get("additional_kwargs")
        if isinstance(extra, Mapping) and extra.get("tool_calls"):
            out["tool_calls"] = extra["tool_calls"]
    return out


def _tool_message_result(raw: Mapping[str, Any]) -> tuple[bool, Any, str | None]:
    """A tool output that is a serialised ``ToolMessage`` (or ``{"output": <one>}``): its content."""
    output = raw.get("output")
    inner: Mapping[str, Any] = output if isinstance(output, Mapping) else raw
    if "lc" in inner:
        normal = _lc_constructor(inner)
    elif "data" in inner:
        normal = _lc_data(inner)
    elif inner.get("type") == "tool" and "content" in inner:  # the message's model_dump (LangSmith)
        normal = _normal(inner, "tool")
    else:
        normal = None
    if normal is None or normal.get("role") != "tool":
        return False, None, None
    call_id = normal.get("tool_call_id")
    return True, loads_maybe(normal.get("content")), call_id if isinstance(call_id, str) else None


# --- Traceloop's LangChain spans ---------------------------------------------------------------


def _is_traceloop(span: Span) -> bool:
    return span.scope.name.startswith("opentelemetry.instrumentation.langchain")


def read_agent(span: Span, trace: TraceView) -> AgentInfo | NotOne | None:
    """The empty ``invoke_agent X`` beside ``execute_task X``: the run of X is that task."""
    if not _is_traceloop(span) or genai.operation(span) != "invoke_agent" or openllmetry.KIND in span.attributes:
        return None
    name = first_str(span.attributes, "gen_ai.agent.name")
    parent = trace.parent(span)
    if name is None or parent is None:
        return None
    task = next(
        (
            s
            for s in trace.children.get(parent.span_id, ())
            if s is not span
            and genai.operation(s) == "execute_task"
            and first_str(s.attributes, "gen_ai.task.name", "traceloop.entity.name") == name
        ),
        None,
    )
    if task is None:
        return None
    info = genai.read_agent(span, trace)
    if not isinstance(info, AgentInfo):
        return NOT_ONE
    info.extra_spans = (task,)
    return info


def _tool_arguments(value: Any) -> Any:
    """The arguments inside Traceloop's callback payload (``inputs``, else the repr ``input_str``)."""
    data = loads_maybe(value)
    if not isinstance(data, Mapping) or not ({"input_str", "inputs"} & set(data)):
        return parse_arguments(data)
    if isinstance(data.get("inputs"), Mapping):
        return dict(data["inputs"])
    text = data.get("input_str")
    if not isinstance(text, str):
        return None
    parsed = loads_maybe(text)
    if parsed is text:
        try:
            parsed = ast.literal_eval(text)  # LangChain writes str(dict): a Python literal
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return text
    return parsed


def read_tool(span: Span, trace: TraceView) -> ToolExec | None:
    if not _is_traceloop(span) or genai.operation(span) != "execute_tool":
        return None
    attrs = span.attributes
    result, call_id = unwrap_tool_output(
        loads_maybe(attrs.get("gen_ai.tool.call.result", attrs.get("traceloop.entity.output")))
    )
    return ToolExec(
        span=span,
        name=first_str(attrs, "gen_ai.tool.name", "traceloop.entity.name") or span.name,
        id=first_str(attrs, "gen_ai.tool.call.id") or call_id,
        arguments=_tool_arguments(attrs.get("gen_ai.tool.call.arguments", attrs.get("traceloop.entity.input"))),
        result=result,
        error=span_error(span),
    )


def detect(facts: TraceFacts) -> float:
    if facts.scope_startswith("opentelemetry.instrumentation.langchain"):
        return 0.76
    return 0.0


CONVENTION = Convention(
    name=NAME,
    label=openllmetry.NAME,
    detect=detect,
    agent=read_agent,
    tool=read_tool,
    message_shapes={"lc": _lc_constructor, "data": _lc_data},
    result_shapes={
        "lc": _tool_message_result,
        "data": _tool_message_result,
        "output": _tool_message_result,
        "tool_call_id": _tool_message_result,
    },
    markers=(b"opentelemetry.instrumentation.langchain",),
)
