"""Shared helpers for every convention adapter: what a message says, splitting a conversation,
token usage; and (re-exported) the values and messages parsing of :mod:`.values` and
:mod:`.messages`, so adapters import one module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tracescorer.conventions.messages import (
    blob_output,
    output_from_text,
    parse_message,
    parse_messages,
    parse_openai_tool_call,
    parse_system_instructions,
)
from tracescorer.conventions.parts import (
    ASSISTANT,
    SYSTEM,
    TOOL,
    USER,
    make_message,
    new_message,
    norm_role,
    parse_part,
    register_part_shapes,
    register_shapes,
    text_message,
    text_of,
    text_part,
    tool_call_part,
    tool_response_part,
    unwrap_result,
    unwrap_tool_output,
)
from tracescorer.conventions.values import (
    as_str,
    first_num,
    first_str,
    indexed,
    loads_maybe,
    parse_arguments,
    parse_result,
)
from tracescorer.model import Message, Part

__all__ = [
    "ASSISTANT",
    "SYSTEM",
    "TOOL",
    "USER",
    "any_content",
    "as_str",
    "blob_output",
    "dedupe",
    "first_num",
    "first_str",
    "genai_usage",
    "has_content",
    "indexed",
    "is_genuine_user",
    "key_of",
    "last_user_block",
    "loads_maybe",
    "make_message",
    "new_message",
    "norm_role",
    "output_from_text",
    "parse_arguments",
    "parse_message",
    "parse_messages",
    "parse_openai_tool_call",
    "parse_part",
    "parse_result",
    "parse_system_instructions",
    "part_has_content",
    "register_part_shapes",
    "register_shapes",
    "split_history",
    "split_system",
    "text_message",
    "text_of",
    "text_part",
    "tool_call_part",
    "tool_response_part",
    "unwrap_result",
    "unwrap_tool_output",
    "usage_from",
]


# --- message predicates -----------------------------------------------------------------------


def is_genuine_user(msg: Message) -> bool:
    """A user turn written by a person: role user with some non-tool-result part.

    Several frameworks (pydantic-ai, Anthropic-style APIs) send tool results as ``role: user``
    messages; those are not user input.
    """
    if msg.role != USER:
        return False
    if not msg.parts:
        return bool(msg.content)
    return any(p.type != "tool_call_response" for p in msg.parts)


#: Keys of non-text parts that describe a part rather than carry its data.
_STRUCTURE_KEYS = frozenset(
    {
        "modality",
        "mime_type",
        "media_type",
        "mimeType",
        "mediaType",
        "builtin",
        "code_arg_name",
        "code_arg_language",
        "providerOptions",
        "providerMetadata",
        "provider_details",
    }
)


def part_has_content(part: Part) -> bool:
    """Whether a part carries captured content, not just structure.

    With content capture off, emitters still write the shape of a message: a text part without
    text, a tool call with only its id and name, a tool result without the result, a blob
    without data. Content is text, tool-call arguments, tool results or media data.
    """
    if part.type in ("text", "reasoning"):
        return bool(part.content)
    if part.type == "tool_call":
        return part.arguments is not None or part.response is not None
    if part.type == "tool_call_response":
        return part.response is not None
    return bool(part.content) or any(v not in (None, "") for k, v in part.extra.items() if k not in _STRUCTURE_KEYS)


def has_content(msg: Message) -> bool:
    """Whether a message carries captured content (see :func:`part_has_content`).

    A message that only shows structure — roles, parts without text, tool call ids and names —
    is what content capture off leaves behind; it is not a message of the run.
    """
    if msg.content:
        return True
    return any(part_has_content(p) for p in msg.parts)


def any_content(*groups: Iterable[Message]) -> bool:
    """Whether any message of ``groups`` carries content."""
    for g in groups:
        for m in g:
            if m.content or has_content(m):
                return True
    return False


def key_of(msg: Message) -> tuple[str, str]:
    """Identity of a message for matching across spans: role and text."""
    return (msg.role, msg.content.strip())


def split_system(messages: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """(system messages, the rest)."""
    system = [m for m in messages if m.role == SYSTEM]
    rest = [m for m in messages if m.role != SYSTEM]
    return system, rest


def last_user_block(messages: Sequence[Message]) -> tuple[int, int]:
    """Bounds [start, end) of the last contiguous block of genuine user messages (-1, -1: none)."""
    end = -1
    for i in range(len(messages) - 1, -1, -1):
        if is_genuine_user(messages[i]):
            end = i + 1
            break
    if end < 0:
        return -1, -1
    start = end - 1
    while start > 0 and is_genuine_user(messages[start - 1]):
        start -= 1
    return start, end


def split_history(
    given: Sequence[Message], new_input: Sequence[Message] | None = None
) -> tuple[list[Message], list[Message], list[Message]]:
    """Split what the model was given into (history, new input, in-run messages).

    ``given`` holds no system messages. With ``new_input`` known (the agent span says what this
    run added), history is everything before that input's last occurrence; otherwise the new
    input is the last block of genuine user messages. Messages after the new input (tool turns
    of this same run) are returned separately so they are never taken for history.
    """
    if new_input:
        wanted = [key_of(m) for m in new_input if is_genuine_user(m)]
        if wanted:
            for i in range(len(given) - 1, -1, -1):
                if key_of(given[i]) == wanted[0]:
                    n = len(wanted)
                    return list(given[:i]), list(new_input), list(given[i + n :])
            # The agent input is not among the model's messages (rewritten by a prompt
            # template, say): history is what precedes the last user block.
    start, end = last_user_block(given)
    if start < 0:
        return list(given), list(new_input or ()), []
    if new_input:
        return list(given[:start]), list(new_input), list(given[end:])
    return list(given[:start]), list(given[start:end]), list(given[end:])


def _parts_key(parts: Sequence[Part]) -> Any:
    if all(p.type == "text" and not p.extra and p.id is None for p in parts):
        return tuple([p.content for p in parts])  # plain text: its texts say it all
    return repr([p.to_dict() for p in parts])


def dedupe(messages: Iterable[Message]) -> list[Message]:
    """Drop exact repeats (same role, text and parts), keeping the first."""
    seen: set[tuple[str, str, Any]] = set()
    out = []
    for m in messages:
        k = (m.role, m.content, _parts_key(m.parts))
        if k not in seen:
            seen.add(k)
            out.append(m)
    return out


# --- usage ------------------------------------------------------------------------------------


def usage_from(attrs: Mapping[str, Any], names: Mapping[str, Sequence[str]]) -> dict[str, int | float] | None:
    """Token counts under our names, each read from the first present of its source keys."""
    out: dict[str, int | float] = {}
    for ours, keys in names.items():
        for key in keys:
            value = attrs.get(key)
            if value is None:
                continue
            if type(value) is int or type(value) is float:
                out[ours] = value
                break
            value = first_num(attrs, *keys)
            if value is not None:
                out[ours] = value
            break
    return out or None


_GENAI_USAGE: dict[str, dict[str, tuple[str, ...]]] = {}


def genai_usage(attrs: Mapping[str, Any], prefix: str = "gen_ai.usage.") -> dict[str, int | float] | None:
    """GenAI usage attributes, current and older names (``prompt_tokens``/``completion_tokens``)."""
    names = _GENAI_USAGE.get(prefix)
    if names is None:
        names = _GENAI_USAGE[prefix] = {
            "input_tokens": (prefix + "input_tokens", prefix + "prompt_tokens"),
            "output_tokens": (prefix + "output_tokens", prefix + "completion_tokens"),
            "total_tokens": (prefix + "total_tokens", "llm.usage.total_tokens"),
            "cache_read_input_tokens": (prefix + "cache_read.input_tokens", prefix + "cache_read_input_tokens"),
            # renamed cache_write in the GenAI conventions' own repository: both are read
            "cache_creation_input_tokens": (
                prefix + "cache_creation.input_tokens",
                prefix + "cache_write.input_tokens",
                prefix + "cache_creation_input_tokens",
                prefix + "cache_write_input_tokens",
            ),
            "reasoning_tokens": (prefix + "reasoning.output_tokens", prefix + "reasoning_tokens"),
        }
    return usage_from(attrs, names)
