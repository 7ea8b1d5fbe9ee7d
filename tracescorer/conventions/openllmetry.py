"""OpenLLMetry / Traceloop: numbered prompt keys and ``traceloop.*`` entity spans.

Model calls: ``gen_ai.prompt.{i}.role|content|tool_call_id|tool_calls.{j}.id|name|arguments``
and ``gen_ai.completion.{i}.role|content|finish_reason|tool_calls.{j}.*`` (older releases:
``llm.prompts.{i}.*`` / ``llm.completions.{i}.*``), or whole JSON blobs in ``gen_ai.prompt`` /
``gen_ai.completion``. Newer releases emit current GenAI keys, read by :mod:`.genai`.
Agents: ``traceloop.span.kind`` = agent (or a workflow with no agent below it), named by
``gen_ai.agent.name`` / ``traceloop.entity.name`` / ``traceloop.workflow.name``.
Tools: ``traceloop.span.kind`` = tool with ``traceloop.entity.input`` (``{"args", "kwargs"}``)
and ``traceloop.entity.output``.
"""

from __future__ import annotations

import re
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
    blob_output,
    first_str,
    genai_usage,
    indexed,
    loads_maybe,
    output_from_text,
    parse_message,
    parse_messages,
    parse_result,
)
from tracescorer.model import Message, Span

NAME = "openllmetry"
_PROMPT_PREFIXES = ("gen_ai.prompt", "llm.prompts")
_COMPLETION_PREFIXES = ("gen_ai.completion", "llm.completions")
KIND = "traceloop.span.kind"


def _numbered(attrs: Mapping[str, Any], prefix: str) -> list[Message]:
    out = []
    for entry in indexed(attrs, prefix):
        raw: dict[str, Any] = {"role": entry.get("role") or ASSISTANT}
        content = entry.get("content")
        parsed = loads_maybe(content)
        # Multimodal content is written as a JSON list of parts.
        raw["content"] = parsed if isinstance(parsed, list) else content
        calls = indexed(entry, "tool_calls")
        if calls:
            raw["tool_calls"] = [
                {"id": c.get("id"), "function": {"name": c.get("name"), "arguments": c.get("arguments")}} for c in calls
            ]
        if "tool_call_id" in entry:
            raw["tool_call_id"] = entry["tool_call_id"]
        if "finish_reason" in entry:
            raw["finish_reason"] = entry["finish_reason"]
        msg = parse_message(raw)
        if msg is not None and (msg.parts or msg.content):
            out.append(msg)
    return out


_NUMBERED_RE = re.compile(r"^(?:gen_ai\.prompt|gen_ai\.completion|llm\.prompts|llm\.completions)\.\d")
_NUMBERED_STARTS = tuple(p + "." for p in (*_PROMPT_PREFIXES, *_COMPLETION_PREFIXES))


def _has_numbered(attrs: Mapping[str, Any]) -> bool:
    return any(k.startswith(_NUMBERED_STARTS) and _NUMBERED_RE.match(k) for k in attrs)


def read_llm_call(span: Span, trace: TraceView) -> LlmCall | None:
    attrs = span.attributes
    if _has_numbered(attrs):
        inputs = [m for p in _PROMPT_PREFIXES for m in _numbered(attrs, p)]
        outputs = [m for p in _COMPLETION_PREFIXES for m in _numbered(attrs, p)]
    elif isinstance(attrs.get("gen_ai.prompt"), str) or isinstance(attrs.get("gen_ai.completion"), str):
        inputs = parse_messages(attrs.get("gen_ai.prompt"))
        outputs = blob_output(attrs.get("gen_ai.completion"))
        if not (inputs or outputs):
            return None
    else:
        return None
    return LlmCall(
        span=span,
        input=inputs,
        output=[m for m in outputs if m.role == ASSISTANT],
        model=first_str(
            attrs, "gen_ai.response.model", "gen_ai.request.model", "llm.response.model", "llm.request.model"
        ),
        usage=genai_usage(attrs),
    )


def _entity_args(value: Any) -> Any:
    """Traceloop's ``{"args": [...], "kwargs": {...}}`` call record as tool arguments."""
    data = loads_maybe(value)
    if isinstance(data, Mapping) and set(data) <= {"args", "kwargs"}:
        args, kwargs = data.get("args") or [], data.get("kwargs") or {}
        if not args:
            return kwargs
        if not kwargs:
            return args[0] if len(args) == 1 else args
        return {"args": args, **kwargs}
    return data


def read_tool(span: Span, trace: TraceView) -> ToolExec | None:
    attrs = span.attributes
    if attrs.get(KIND) != "tool":
        return None
    name = first_str(attrs, "gen_ai.tool.name", "traceloop.entity.name")
    if name is None:
        name = span.name.removesuffix(".tool")
    return ToolExec(
        span=span,
        name=name,
        id=first_str(attrs, "gen_ai.tool.call.id"),
        arguments=_entity_args(attrs.get("traceloop.entity.input")),
        result=parse_result(attrs.get("traceloop.entity.output")),
        error=span_error(span),
    )


def read_agent(span: Span, trace: TraceView) -> AgentInfo | None:
    attrs = span.attributes
    kind = attrs.get(KIND)
    if kind not in ("workflow", "agent"):
        return None
    return AgentInfo(
        span=span,
        name=first_str(attrs, "gen_ai.agent.name", "traceloop.entity.name", "traceloop.workflow.name"),
        conversation_id=first_str(attrs, "gen_ai.conversation.id"),
        output=output_from_text(attrs.get("traceloop.entity.output")),
        # A workflow is the run only when no agent span sits below it (see .nesting).
        wrapper=kind == "workflow",
    )


#: The first numbered message's keys: every numbered prompt or completion has them.
_FIRST_NUMBERED = frozenset(
    f"{p}.0.{f}" for p in (*_PROMPT_PREFIXES, *_COMPLETION_PREFIXES) for f in ("role", "content")
)


def detect(facts: TraceFacts) -> float:
    if KIND in facts.keys:
        return 0.75
    if not _FIRST_NUMBERED.isdisjoint(facts.keys) or (
        # numbering with gaps (no index 0): look closer, only where such keys can be
        {"gen_ai", "llm"} & facts.namespaces
        and "gen_ai.operation.name" not in facts.keys
        and any(k.startswith(_NUMBERED_STARTS) and _NUMBERED_RE.match(k) for k in facts.keys)
    ):
        return 0.7
    if "llm.request.type" in facts.keys:
        return 0.3
    if "gen_ai.prompt" in facts.keys or "gen_ai.completion" in facts.keys:
        return 0.1  # whole JSON blobs: ours to read, another convention's to label
    return 0.0


CONVENTION = Convention(
    name=NAME,
    detect=detect,
    agent=read_agent,
    llm_call=read_llm_call,
    tool=read_tool,
    markers=(KIND.encode(), b"gen_ai.", b"llm."),
)
