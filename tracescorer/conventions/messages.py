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

Part shapes are looked up by a part's ``type`` and, for untyped parts, by the key that tells
the shape apart; the generic shapes are here, each framework's own (AI SDK, Mastra, Bedrock
content blocks, google.genai parts, LangChain's serialised messages, tool-result wrappers) come
with its convention record and are installed by the registry (:func:`register_shapes`).
Nothing here invents content: an unknown shape yields no message rather than a guess.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tracescorer.conventions.values import as_str, loads_maybe, parse_arguments, parse_result
from tracescorer.model import Message, Part

PartParser = Callable[[Mapping[str, Any]], Part | None]


# --- fast constructors ------------------------------------------------------------------------
# Parsing makes a Part and a Message per chat message; the frozen dataclasses' generated
# __init__ goes through object.__setattr__ per field, three times slower than setting the slots
# directly. These build the very same objects; if the model's fields ever differ from what they
# set, the plain constructors are used instead.


def _no_setter(obj: Any, value: Any) -> None:
    raise AssertionError("unreachable: the plain constructor is used without slot setters")


def _slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Callable[[Any, Any], None], ...] | None:
    if tuple(f.name for f in dataclasses.fields(cls)) != names:
        return None
    return tuple(cls.__dict__[n].__set__ for n in names)


_PART_SET = _slot_setters(Part, ("type", "content", "id", "name", "arguments", "response", "extra"))
_MSG_SET = _slot_setters(Message, ("role", "content", "parts", "name", "finish_reason"))
_new = object.__new__
_P_TYPE, _P_CONTENT, _P_ID, _P_NAME, _P_ARGS, _P_RESP, _P_EXTRA = _PART_SET or (_no_setter,) * 7


def text_part(content: str | None) -> Part:
    """``Part(type="text", content=content)``, built fast."""
    if _PART_SET is None:
        return Part(type="text", content=content)
    p = _new(Part)
    t, c, i, n, a, r, e = _PART_SET
    t(p, "text")
    c(p, content)
    i(p, None)
    n(p, None)
    a(p, None)
    r(p, None)
    e(p, {})
    return p


def new_message(
    role: str, content: str, parts: tuple[Part, ...], name: str | None = None, finish_reason: str | None = None
) -> Message:
    """``Message(...)`` with every field given, built fast."""
    if _MSG_SET is None:
        return Message(role=role, content=content, parts=parts, name=name, finish_reason=finish_reason)
    m = _new(Message)
    r, c, p, n, f = _MSG_SET
    r(m, role)
    c(m, content)
    p(m, parts)
    n(m, name)
    f(m, finish_reason)
    return m


USER, ASSISTANT, SYSTEM, TOOL = "user", "assistant", "system", "tool"
_ROLE_ALIASES = {
    "human": USER,
    "customer": USER,
    "developer": SYSTEM,
    "instruction": SYSTEM,
    "instructions": SYSTEM,
    "ai": ASSISTANT,
    "model": ASSISTANT,
    "bot": ASSISTANT,
    "function": TOOL,
    "tool_result": TOOL,
}


# --- roles and text ---------------------------------------------------------------------------


def norm_role(role: Any) -> str:
    r = str(role or "").strip().lower()
    return _ROLE_ALIASES.get(r, r or USER)


#: Exact role strings already in normal form (and the aliases), looked up before normalising.
_ROLES = {**{r: r for r in (USER, ASSISTANT, SYSTEM, TOOL)}, **_ROLE_ALIASES}


def text_of(parts: Iterable[Part]) -> str:
    """The plain-text content of a message: its text parts joined by newlines."""
    return "\n".join(p.content for p in parts if p.type == "text" and p.content)


def make_message(
    role: str, parts: Sequence[Part], *, name: str | None = None, finish_reason: str | None = None
) -> Message:
    return new_message(norm_role(role), text_of(parts), tuple(parts), name, finish_reason)


def text_message(role: str, text: str) -> Message:
    return make_message(role, [text_part(text)])


# --- parts ------------------------------------------------------------------------------------
#
# Part shapes are looked up in two tables: by the part's ``type`` value, and (for untyped parts)
# by the key that tells the shape apart. The shapes below are the generic ones — OTel GenAI,
# OpenAI chat / Responses, Anthropic-style ``tool_use`` / ``tool_result``; each framework's own
# shapes live with its convention module, whose record the registry installs here.

_TEXT_TYPES = ("text", "input_text", "output_text")
_KNOWN_PART_KEYS = {"type", "content", "text", "id", "name", "arguments", "response", "result"}


def _content_str(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _text_part(raw: Mapping[str, Any]) -> Part:
    # A text part without its text (content capture off: pydantic-ai ``{"type": "text"}``)
    # is kept as structure: it still shows a turn was there. It carries no content.
    return text_part(_content_str(raw.get("content", raw.get("text"))))


def _reasoning_part(raw: Mapping[str, Any]) -> Part:
    return Part(type="reasoning", content=_content_str(raw.get("content", raw.get("text", raw.get("thinking")))))


def tool_call_part(raw: Mapping[str, Any]) -> Part:
    """A tool call with ``id``/``toolCallId``/``call_id``, ``name``/``toolName`` and arguments."""
    return Part(
        type="tool_call",
        id=as_str(raw.get("id", raw.get("toolCallId", raw.get("call_id")))),
        name=as_str(raw.get("name", raw.get("toolName"))),
        arguments=parse_arguments(raw.get("arguments", raw.get("input", raw.get("args")))),
    )


def tool_response_part(raw: Mapping[str, Any], response: Any, **extra: Any) -> Part:
    """A tool result part whose id/name are in the usual keys and whose result is ``response``."""
    return Part(
        type="tool_call_response",
        id=as_str(raw.get("id", raw.get("toolCallId", raw.get("tool_use_id", raw.get("call_id"))))),
        name=as_str(raw.get("name", raw.get("toolName"))),
        response=parse_result(response),
        extra=extra,
    )


def _tool_result_part(raw: Mapping[str, Any]) -> Part:
    for key in ("response", "result", "output", "content"):
        if key in raw:
            return tool_response_part(raw, raw[key])
    return tool_response_part(raw, None)


def _media_part(raw: Mapping[str, Any]) -> Part:
    """blob / uri / file / image / server_tool_call / unknown: what it carried, no guessing."""
    ptype = str(raw.get("type") or "").lower()
    norm = {"image": "blob", "image_url": "uri", "input_image": "uri"}.get(ptype, ptype)
    content = raw.get("content")
    return Part(
        type=norm,
        content=content if isinstance(content, str) else None,
        id=as_str(raw.get("id")),
        name=as_str(raw.get("name")),
        extra={k: v for k, v in raw.items() if k not in _KNOWN_PART_KEYS},
    )


_TYPED: dict[str, PartParser] = {
    **dict.fromkeys(_TEXT_TYPES, _text_part),
    "reasoning": _reasoning_part,
    "thinking": _reasoning_part,
    **dict.fromkeys(("tool_call", "function_call", "tool_use"), tool_call_part),
    **dict.fromkeys(("tool_call_response", "tool_result", "function_call_output"), _tool_result_part),
}
_TYPED_PREFIXES: dict[str, PartParser] = {}
_KEYED: dict[str, PartParser] = {}
_KEYED_FALLBACK: dict[str, PartParser] = {"text": _text_part, "content": _text_part}


MessageShape = Callable[[Mapping[str, Any]], Mapping[str, Any] | None]
ResultShape = Callable[[Mapping[str, Any]], tuple[bool, Any, str | None]]
_MESSAGE_SHAPES: dict[str, MessageShape] = {}
_RESULT_SHAPES: dict[str, ResultShape] = {}


def register_shapes(
    owner: str,
    *,
    typed: Mapping[str, PartParser] = {},  # read only
    keyed: Mapping[str, PartParser] = {},
    messages: Mapping[str, MessageShape] = {},
    results: Mapping[str, ResultShape] = {},
) -> None:
    """Install a convention's part, message and tool-result shapes (see :func:`register_part_shapes`)."""
    register_part_shapes(owner, typed, keyed)
    for table, shapes in ((_MESSAGE_SHAPES, messages), (_RESULT_SHAPES, results)):
        for key, parser in shapes.items():
            if table.get(key, parser) is not parser:
                raise ValueError(f"{owner}: shape {key!r} is already registered")
            table[key] = parser  # type: ignore[assignment]


def unwrap_tool_output(value: Any) -> tuple[Any, str | None]:
    """(result, tool call id) of a tool output some frameworks wrap in their own object
    (LangChain's serialised ``ToolMessage``, LlamaIndex's ``ToolOutput``): the wrapped result and
    the call id the wrapper names; anything else is its own result, without an id."""
    if _RESULT_SHAPES and isinstance(value, Mapping):
        for key, shape in _RESULT_SHAPES.items():
            if key in value:
                matched, inner, call_id = shape(value)
                if matched:
                    return inner, call_id
    return value, None


def unwrap_result(value: Any) -> Any:
    """:func:`unwrap_tool_output`'s result alone."""
    return unwrap_tool_output(value)[0]


def register_part_shapes(owner: str, typed: Mapping[str, PartParser], keyed: Mapping[str, PartParser]) -> None:
    """Install a convention's part shapes (``type`` values; keys of untyped parts).

    A ``type`` ending in ``*`` matches by prefix (``tool-*``). Two conventions claiming the same
    shape with different parsers is a programming error, raised at import.
    """
    for table, shapes in ((_TYPED, typed), (_KEYED, keyed)):
        for key, parser in shapes.items():
            target = _TYPED_PREFIXES if table is _TYPED and key.endswith("*") else table
            name = key[:-1] if target is _TYPED_PREFIXES else key
            if target.get(name, parser) is not parser:
                raise ValueError(f"{owner}: part shape {key!r} is already registered")
            target[name] = parser


def parse_part(raw: Any) -> Part | None:
    """One message part in any registered shape, or None when it carries nothing."""
    if isinstance(raw, str):
        return Part(type="text", content=raw)
    if not isinstance(raw, Mapping):
        return None
    ptype = raw.get("type")
    if ptype:
        ptype = str(ptype).lower()
        parser = _TYPED.get(ptype)
        if parser is None:
            for prefix, candidate in _TYPED_PREFIXES.items():
                if ptype.startswith(prefix):
                    parser = candidate
                    break
        return (parser or _media_part)(raw)
    for key, parser in _KEYED.items():
        if key in raw:
            return parser(raw)
    for key, parser in _KEYED_FALLBACK.items():
        if key in raw:
            return parser(raw)
    return None


# --- messages ---------------------------------------------------------------------------------


def _text_value(raw: Mapping[str, Any]) -> str | None:
    text = raw["content"] if "content" in raw else raw.get("text")
    return text if text is None or type(text) is str else _content_str(text)


def parse_message(raw: Any) -> Message | None:
    """One chat message in any supported shape, or None."""
    if type(raw) is not dict and not isinstance(raw, Mapping):
        return None
    role = raw.get("role")
    if role is None:
        for key, shape in _MESSAGE_SHAPES.items():  # serialised framework messages
            if key in raw:
                normal = shape(raw)
                if normal is not None and "role" in normal:
                    return parse_message(normal)
        role = raw.get("type")  # LangChain-style dicts use "type"
        if role is None:
            return None
    role = _ROLES.get(role) if type(role) is str else None
    if role is None:
        role = norm_role(raw.get("role", raw.get("type")))
    raw_parts = raw.get("parts")
    if type(raw_parts) is list:  # GenAI: the common case, read without detours
        parts: list[Part] = []
        for rp in raw_parts:
            if type(rp) is dict and rp.get("type") == "text":
                text = rp["content"] if "content" in rp else rp.get("text")
                if text is not None and type(text) is not str:
                    text = _content_str(text)
                if _PART_SET is None:
                    parts.append(Part(type="text", content=text))
                    continue
                p = _new(Part)
                _P_TYPE(p, "text")
                _P_CONTENT(p, text)
                _P_ID(p, None)
                _P_NAME(p, None)
                _P_ARGS(p, None)
                _P_RESP(p, None)
                _P_EXTRA(p, {})
                parts.append(p)
            else:
                part = parse_part(rp)
                if part is not None:
                    parts.append(part)
        name = raw.get("name")
        if name is not None and type(name) is not str:
            name = as_str(name)
        finish = raw.get("finish_reason")
        if finish is not None and type(finish) is not str:
            finish = as_str(finish)
        if raw.get("tool_calls") or (role == TOOL and "tool_call_id" in raw):
            parts = _openai_keys_beside_parts(raw, role, parts, name)
        if role == TOOL:
            return new_message(TOOL, "", tuple(parts), name, finish)
        return new_message(
            role, "\n".join([p.content for p in parts if p.type == "text" and p.content]), tuple(parts), name, finish
        )
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
        text = text_of(parts) if parts else _content_str(content)
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
