"""Chat messages and their parts in every shape frameworks write (the parsing core).

Frameworks encode the same chat message in a handful of shapes; this module turns all of them
into :class:`~tracescorer.model.Message` so adapters only decide *where* to read, not *how*:

- OTel GenAI: ``{role, parts: [{type: text|tool_call|tool_call_response|reasoning|blob|uri|file,
  ...}], name?, finish_reason?}``
- OpenAI chat: ``{role, content: str | [{type: text, text}], tool_calls: [{id, function: {name,
  arguments}}], tool_call_id}``
- Vercel AI SDK model messages: ``{role, content: str | [{type: text|tool-call|tool-result|
  reasoning|image|file, ...}]}``
- Mastra stored messages (format 2): ``{role, content: {format: 2, parts: [...], content: str}}``
- Flat pairs such as ``{role, content}`` from numbered keys.

Parts are parsed by :mod:`tracescorer.conventions.parts` (the generic shapes there, each
framework's own — AI SDK, Mastra, Bedrock content blocks, google.genai parts, LangChain's
serialised messages, tool-result wrappers — installed from its convention record). Nothing here
invents content: an unknown shape yields no message rather than a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracescorer.conventions.parts import (
    ASSISTANT,
    MESSAGE_SHAPES,
    ROLES,
    SYSTEM,
    TOOL,
    content_str,
    make_message,
    new_message,
    norm_role,
    parse_part,
    text_message,
    text_of,
    text_part,
)
from tracescorer.conventions.values import as_str, loads_maybe, parse_arguments, parse_result
from tracescorer.model import Message, Part

# --- messages ---------------------------------------------------------------------------------


def _text_value(raw: Mapping[str, Any]) -> str | None:
    text = raw["content"] if "content" in raw else raw.get("text")
    return text if text is None or type(text) is str else content_str(text)


def parse_message(raw: Any) -> Message | None:
    """One chat message in any supported shape, or None."""
    if type(raw) is not dict and not isinstance(raw, Mapping):
        return None
    role = raw.get("role")
    if role is None:
        for key, shape in MESSAGE_SHAPES.items():  # serialised framework messages
            if key in raw:
                normal = shape(raw)
                if normal is not None and "role" in normal:
                    return parse_message(normal)
        role = raw.get("type")  # LangChain-style dicts use "type"
        if role is None:
            return None
    role = ROLES.get(role) if type(role) is str else None
    if role is None:
        role = norm_role(raw.get("role", raw.get("type")))
    raw_parts = raw.get("parts")
    if type(raw_parts) is list:  # GenAI: the common case, read without detours
        parts: list[Part] = []
        texts: list[str] = []  # the message's text, gathered as its parts are read
        for rp in raw_parts:
            if type(rp) is dict and rp.get("type") == "text":
                text = rp["content"] if "content" in rp else rp.get("text")
                if text is not None and type(text) is not str:
                    text = content_str(text)
                parts.append(text_part(text))
                if text:
                    texts.append(text)
            else:
                part = parse_part(rp)
                if part is not None:
                    parts.append(part)
                    if part.type == "text" and part.content:
                        texts.append(part.content)
        name = raw.get("name")
        if name is not None and type(name) is not str:
            name = as_str(name)
        finish = raw.get("finish_reason")
        if finish is not None and type(finish) is not str:
            finish = as_str(finish)
        if raw.get("tool_calls") or (role == TOOL and "tool_call_id" in raw):
            parts = _openai_keys_beside_parts(raw, role, parts, name)
            texts = [p.content for p in parts if p.type == "text" and p.content]
        if role == TOOL:
            return new_message(TOOL, "", tuple(parts), name, finish)
        return new_message(role, texts[0] if len(texts) == 1 else "\n".join(texts), tuple(parts), name, finish)
    return _parse_other_message(raw, role)


def _openai_keys_beside_parts(raw: Mapping[str, Any], role: str, parts: list[Part], name: str | None) -> list[Part]:
    """GenAI parts with OpenAI's ``tool_calls`` / ``tool_call_id`` beside them (LiteLLM writes
    its messages so): the calls become tool-call parts, a tool message's text its result."""
    calls = raw.get("tool_calls")
    have = {(p.id, p.name) for p in parts if p.type == "tool_call"}
    out = parts + [
        p
        for p in map(parse_openai_tool_call, calls if isinstance(calls, list) else ())
        if p is not None and (p.id, p.name) not in have  # an emitter writing both: once
    ]
    if role == TOOL and not any(p.type == "tool_call_response" for p in out):
        text = text_of(out)
        return [
            Part(
                type="tool_call_response",
                id=as_str(raw.get("tool_call_id")),
                name=name,
                response=parse_result(text) if out else None,
            )
        ]
    return out


def _parse_other_message(raw: Mapping[str, Any], role: str) -> Message:
    parts: list[Part] = []
    name = as_str(raw.get("name"))
    finish = as_str(raw.get("finish_reason"))

    content = raw.get("content")
    if isinstance(content, Mapping) and isinstance(content.get("parts"), list):  # Mastra v2
        parts.extend(p for p in map(parse_part, content["parts"]) if p is not None)
        if not parts and isinstance(content.get("content"), str):
            parts.append(Part(type="text", content=content["content"]))
        for inv in content.get("toolInvocations") or ():
            part = parse_part({"type": "tool-invocation", "toolInvocation": inv})
            if part is not None and not any(p.id == part.id for p in parts):
                parts.append(part)
    elif isinstance(content, str):
        if content:
            parts.append(text_part(content))
    elif isinstance(content, list):
        parts.extend(p for p in map(parse_part, content) if p is not None)
    elif isinstance(content, Mapping):
        part = parse_part(content)
        if part is not None:
            parts.append(part)
    # OpenAI chat: tool calls and tool results beside the content.
    for tc in raw.get("tool_calls") or ():
        part = parse_openai_tool_call(tc)
        if part is not None:
            parts.append(part)
    fc = raw.get("function_call")
    if isinstance(fc, Mapping):
        parts.append(
            Part(type="tool_call", name=as_str(fc.get("name")), arguments=parse_arguments(fc.get("arguments")))
        )
    call_id = raw.get("tool_call_id", raw.get("id") if role == TOOL else None)
    if role == TOOL and not any(p.type == "tool_call_response" for p in parts):
        text = text_of(parts) if parts else content_str(content)
        parts = [
            Part(
                type="tool_call_response",
                id=as_str(call_id),
                name=name,
                response=parse_result(text) if text is not None else None,
            )
        ]
    if role == TOOL:
        # A tool message's text is its result; keep content empty so it never reads as prose.
        return Message(role=TOOL, content="", parts=tuple(parts), name=name, finish_reason=finish)
    return make_message(role, parts, name=name, finish_reason=finish)


def parse_openai_tool_call(tc: Any) -> Part | None:
    if not isinstance(tc, Mapping):
        return None
    fn_value = tc.get("function")
    fn: Mapping[str, Any] = fn_value if isinstance(fn_value, Mapping) else {}
    name = fn.get("name", tc.get("name", tc.get("toolName")))
    if name is None:
        return None
    return Part(
        type="tool_call",
        id=as_str(tc.get("id", tc.get("toolCallId"))),
        name=as_str(name),
        arguments=parse_arguments(fn.get("arguments", tc.get("arguments", tc.get("args", tc.get("input"))))),
    )


def parse_messages(value: Any) -> list[Message]:
    """A message list from a JSON string or structured value.

    Accepts a bare list, ``{"messages": [...]}`` (request bodies, Mastra/AI SDK prompts) and
    ``{"body": {"messages": [...]}}``. Anything else gives an empty list.
    """
    if value is None:
        return []
    data = loads_maybe(value)
    if type(data) is not list:
        if not isinstance(data, Mapping):
            return []
        if isinstance(data.get("body"), Mapping):
            data = data["body"]
        if isinstance(data.get("messages"), list):
            data = data["messages"]
        elif "role" in data:
            data = [data]
        if not isinstance(data, list):
            return []
    out = []
    for raw in data:
        msg = parse_message(raw)
        if msg is not None and (msg.parts or msg.content):
            out.append(msg)
    return out


def parse_system_instructions(value: Any) -> list[Message]:
    """``gen_ai.system_instructions``: a parts list (JSON or structured) or a plain string."""
    if value is None:
        return []
    data = loads_maybe(value)
    if data is None or data == "":
        return []
    if isinstance(data, str):
        return [text_message(SYSTEM, data)]
    if isinstance(data, Mapping):
        data = [data]
    if not isinstance(data, list):
        return []
    # Some emitters write whole messages instead of parts.
    if data and all(isinstance(d, Mapping) and "role" in d for d in data):
        return list(parse_messages(data))
    parts = [p for p in map(parse_part, data) if p is not None]
    return [make_message(SYSTEM, parts)] if parts else []


def output_from_text(text: Any) -> list[Message]:
    """An assistant message from an agent-level output value (text, or ``{text: ...}`` JSON)."""
    data = loads_maybe(text)
    if isinstance(data, Mapping):
        for key in ("text", "content", "output", "result", "response"):
            if isinstance(data.get(key), str):
                data = data[key]
                break
        else:
            msgs = parse_messages(data)
            return [m for m in msgs if m.role == ASSISTANT]
    if isinstance(data, list):
        return [m for m in parse_messages(data) if m.role == ASSISTANT]
    if isinstance(data, str) and data:
        return [text_message(ASSISTANT, data)]
    return []


def blob_output(value: Any) -> list[Message]:
    """A ``gen_ai.completion`` JSON blob: messages, or ``{text, toolCalls}`` objects."""
    data = loads_maybe(value)
    msgs = [m for m in parse_messages(data) if m.role == ASSISTANT]
    if msgs:
        return msgs
    if isinstance(data, Mapping) and ("toolCalls" in data or "tool_calls" in data):
        msg = parse_message(
            {
                "role": ASSISTANT,
                "content": data.get("text") or "",
                "tool_calls": data.get("toolCalls", data.get("tool_calls")),
            }
        )
        return [msg] if msg is not None and (msg.parts or msg.content) else []
    return output_from_text(data)
