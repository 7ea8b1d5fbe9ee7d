"""Message parts in every shape frameworks write, roles, and fast constructors (the parsing core's
lower half; :mod:`tracescorer.conventions.messages` builds whole messages from them).

Part shapes are looked up by a part's ``type`` and, for untyped parts, by the key that tells the
shape apart; the generic shapes are here, each framework's own come with its convention record
and are installed by the registry (:func:`register_shapes`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tracescorer.conventions.values import as_str, parse_arguments, parse_result
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


PART_SET = _slot_setters(Part, ("type", "content", "id", "name", "arguments", "response", "extra"))
_MSG_SET = _slot_setters(Message, ("role", "content", "parts", "name", "finish_reason"))
new_instance = object.__new__


def text_part(content: str | None) -> Part:
    """``Part(type="text", content=content)``, built fast."""
    if PART_SET is None:
        return Part(type="text", content=content)
    p = new_instance(Part)
    t, c, i, n, a, r, e = PART_SET
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
    m = new_instance(Message)
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
ROLES = {**{r: r for r in (USER, ASSISTANT, SYSTEM, TOOL)}, **_ROLE_ALIASES}


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


def content_str(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _text_part(raw: Mapping[str, Any]) -> Part:
    # A text part without its text (content capture off: pydantic-ai ``{"type": "text"}``)
    # is kept as structure: it still shows a turn was there. It carries no content.
    return text_part(content_str(raw.get("content", raw.get("text"))))


def _reasoning_part(raw: Mapping[str, Any]) -> Part:
    return Part(type="reasoning", content=content_str(raw.get("content", raw.get("text", raw.get("thinking")))))


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
MESSAGE_SHAPES: dict[str, MessageShape] = {}
RESULT_SHAPES: dict[str, ResultShape] = {}


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
    for table, shapes in ((MESSAGE_SHAPES, messages), (RESULT_SHAPES, results)):
        for key, parser in shapes.items():
            if table.get(key, parser) is not parser:
                raise ValueError(f"{owner}: shape {key!r} is already registered")
            table[key] = parser  # type: ignore[assignment]


def unwrap_tool_output(value: Any) -> tuple[Any, str | None]:
    """(result, tool call id) of a tool output some frameworks wrap in their own object
    (LangChain's serialised ``ToolMessage``, LlamaIndex's ``ToolOutput``): the wrapped result and
    the call id the wrapper names; anything else is its own result, without an id."""
    if RESULT_SHAPES and (type(value) is dict or isinstance(value, Mapping)):
        for key, shape in RESULT_SHAPES.items():
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
    if type(raw) is not dict and not isinstance(raw, Mapping):  # dict first: an ABC check is slow
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
