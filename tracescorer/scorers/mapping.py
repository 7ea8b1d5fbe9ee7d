"""Plain mappings and message dicts turned into :class:`ScorerRun` / :class:`Message` values.

``scorer.run({"input": ..., "output": ...})`` comes here. Message dicts may be OpenAI-style
(``{"role", "content"}`` with a string or a list of typed parts), OTel GenAI-style parts
(``text``, ``tool_call``, ``tool_call_response``) or Mastra's stored form
(``content: {"parts": [...], "toolInvocations": [...]}`` with ``tool-invocation`` parts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from tracescorer.model import Message, Part, ToolCall
from tracescorer.scorers.agent_io import AgentInput
from tracescorer.scorers.types import ScorerRun

RUN_KEYS = ("input", "output", "run_id", "ground_truth", "request_context", "metadata")
_INPUT_KEYS = ("input_messages", "remembered_messages", "system_messages", "tagged_system_messages", "tool_calls")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def _check_keys(data: Mapping[str, Any], allowed: Sequence[str], what: str) -> None:
    unknown = [k for k in data if k not in allowed]
    if unknown:
        hints = [f"{k!r} -> {_snake(k)!r}" for k in unknown if _snake(k) in allowed]
        hint = f" (Python field names: {', '.join(hints)})" if hints else ""
        raise TypeError(f"unknown {what} key(s) {unknown}{hint}; allowed: {list(allowed)}")


def _first(data: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if data.get(key) is not None:
            return data[key]
    return None


def part_from_dict(data: Mapping[str, Any]) -> Part:
    """A message part from an OTel GenAI, OpenAI or Mastra part dict."""
    kind = str(data.get("type") or "text")
    if kind == "tool-invocation":
        inv = data.get("toolInvocation") or {}
        return Part(
            type="tool_call",
            id=_first(inv, "toolCallId", "id"),
            name=_first(inv, "toolName", "name"),
            arguments=_first(inv, "args", "input"),
            response=_first(inv, "result", "output"),
        )
    if kind in ("tool_call", "tool-call", "function_call"):
        return Part(
            type="tool_call",
            id=_first(data, "id", "toolCallId", "call_id"),
            name=_first(data, "name", "toolName"),
            arguments=_first(data, "arguments", "args", "input"),
        )
    if kind in ("tool_call_response", "tool-result", "tool_result"):
        return Part(
            type="tool_call_response",
            id=_first(data, "id", "toolCallId", "call_id"),
            name=_first(data, "name", "toolName"),
            response=_first(data, "response", "result", "output"),
        )
    text = _first(data, "content", "text")
    return Part(
        type=kind,
        content=text if isinstance(text, str) else None,
        extra={k: v for k, v in data.items() if k not in ("type", "content", "text")},
    )


def message_from_dict(value: Message | Mapping[str, Any] | str, *, default_role: str = "assistant") -> Message:
    """A :class:`Message` from a message dict (or a string, as a ``default_role`` message)."""
    if isinstance(value, Message):
        return value
    if isinstance(value, str):
        return Message(role=default_role, content=value, parts=(Part(type="text", content=value),))
    if not isinstance(value, Mapping):
        raise TypeError(f"a message must be a dict, a string or a Message, got {type(value).__name__}")
    role = str(value.get("role") or default_role)
    content = value.get("content")
    raw_parts: list[Any] = []
    if isinstance(content, Mapping):  # Mastra's stored message: {format, parts, content, ...}
        raw_parts = list(content.get("parts") or [])
        if not raw_parts and isinstance(content.get("content"), str):
            raw_parts = [{"type": "text", "text": content["content"]}]
        invocations = content.get("toolInvocations") or []
        if invocations and not any(isinstance(p, Mapping) and p.get("type") == "tool-invocation" for p in raw_parts):
            raw_parts += [{"type": "tool-invocation", "toolInvocation": i} for i in invocations]
    elif isinstance(content, list):
        raw_parts = content
    elif isinstance(content, str):
        raw_parts = [{"type": "text", "text": content}] if content else []
    for call in value.get("tool_calls") or ():  # OpenAI assistant message tool calls
        if isinstance(call, Mapping):
            function = call.get("function") or {}
            raw_parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": function.get("name", call.get("name")),
                    "arguments": function.get("arguments", call.get("arguments")),
                }
            )
    if role == "tool" and value.get("tool_call_id") and isinstance(content, str):
        raw_parts = [{"type": "tool_call_response", "id": value["tool_call_id"], "response": content}]
    parts = tuple(part_from_dict(p) if isinstance(p, Mapping) else Part(type="text", content=str(p)) for p in raw_parts)
    text = "\n".join(p.content for p in parts if p.type == "text" and p.content)
    return Message(
        role=role, content=text, parts=parts, name=value.get("name") if isinstance(value.get("name"), str) else None
    )


def _messages(value: Any, role: str) -> tuple[Message, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, Mapping, Message)):
        value = [value]
    return tuple(message_from_dict(v, default_role=role) for v in value)


def _tool_call(value: ToolCall | Mapping[str, Any]) -> ToolCall:
    if isinstance(value, ToolCall):
        return value
    return ToolCall(
        id=_first(value, "id", "toolCallId"),
        name=str(_first(value, "name", "toolName")),
        arguments=_first(value, "arguments", "args"),
        result=_first(value, "result", "output"),
        error=value.get("error"),
    )


def agent_input_from(value: Any) -> AgentInput:
    """An :class:`AgentInput` from a mapping of its fields, a message list or a string."""
    if value is None or isinstance(value, AgentInput):
        return value if value is not None else AgentInput()
    if not isinstance(value, Mapping) or "role" in value:
        return AgentInput(input_messages=_messages(value, "user"))
    _check_keys(value, _INPUT_KEYS, "agent input")
    tagged = value.get("tagged_system_messages") or {}
    return AgentInput(
        input_messages=_messages(value.get("input_messages"), "user"),
        remembered_messages=_messages(value.get("remembered_messages"), "user"),
        system_messages=_messages(value.get("system_messages"), "system"),
        tagged_system_messages={str(k): _messages(v, "system") for k, v in tagged.items()},
        tool_calls=tuple(_tool_call(t) for t in value.get("tool_calls") or ()),
    )


def _agent_output(value: Any) -> Any:
    if isinstance(value, (str, Mapping, Message)):
        return (message_from_dict(value),)
    if isinstance(value, Sequence):
        # bare strings inside a list are not messages: kept as they are (the prebuilt judges
        # ignore them) rather than promoted to assistant turns
        return tuple(v if isinstance(v, str) else message_from_dict(v) for v in value)
    return value


def run_from_mapping(data: Mapping[str, Any], *, agent: bool) -> ScorerRun[Any, Any]:
    """A :class:`ScorerRun` from ``{"input", "output", "run_id", "ground_truth",
    "request_context", "metadata"}`` (``output`` required). With ``agent=True`` the input
    becomes an :class:`AgentInput` and the output a tuple of :class:`Message`."""
    _check_keys(data, RUN_KEYS, "run")
    if "output" not in data:
        raise TypeError("a run mapping needs 'output'")
    run_input, output = data.get("input"), data["output"]
    if agent:
        run_input, output = agent_input_from(run_input), _agent_output(output)
    run_id = data.get("run_id")
    return ScorerRun(
        input=run_input,
        output=output,
        run_id=str(run_id) if run_id is not None else None,
        ground_truth=data.get("ground_truth"),
        request_context=data.get("request_context"),
        metadata=dict(data.get("metadata") or {}),
    )
