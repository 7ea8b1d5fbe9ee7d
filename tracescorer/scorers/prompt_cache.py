"""Judge prompts laid out for provider prompt caching, and the cached tokens a reply reports.

Providers bill a repeated prompt prefix at a fraction of the input price: OpenAI caches the
longest stable prefix of 1,024 tokens or more by itself; Anthropic caches up to a block marked
``cache_control``. Either way the static part of a judge request (its instructions and, when the
schema is asked for in the prompt, the schema's instructions) must come first and be the same
bytes every time; the run's content follows. :func:`static_first` builds that layout and
:func:`mark_static` marks the static system message for providers that need marks.
"""

from __future__ import annotations

from typing import Any

from tracescorer.scorers.processors import ChatMessage

__all__ = ["cached_tokens", "mark_static", "needs_marks", "static_first"]

EPHEMERAL = {"type": "ephemeral"}
# litellm providers whose prompt caching works only up to an explicit cache_control mark
_MARKED_PROVIDERS = frozenset({"anthropic"})


def static_first(messages: list[ChatMessage], schema_text: str | None) -> list[ChatMessage]:
    """``messages`` with ``schema_text`` (the schema asked for in the prompt) at the end of the
    leading system message, or in a system message of its own before the rest: static text
    before the run's content. Applied after the input processors: the instructions are ours,
    not data to process."""
    if not schema_text:
        return messages
    first = messages[0] if messages else None
    if first is not None and first.get("role") == "system" and isinstance(first.get("content"), str):
        return [{**first, "content": f"{first['content']}\n\n{schema_text}"}, *messages[1:]]
    return [{"role": "system", "content": schema_text}, *messages]


def needs_marks(provider: str | None) -> bool:
    """Whether requests to ``provider`` (litellm's provider name) need ``cache_control`` marks."""
    return provider in _MARKED_PROVIDERS


def mark_static(messages: list[ChatMessage]) -> list[ChatMessage]:
    """``messages`` with the leading system message as one text block marked ``cache_control``
    (ephemeral): the provider caches everything up to it (tools, then the system prompt)."""
    first = messages[0] if messages else None
    if first is None or first.get("role") != "system" or not isinstance(first.get("content"), str):
        return messages
    block = {"type": "text", "text": first["content"], "cache_control": EPHEMERAL}
    return [{**first, "content": [block]}, *messages[1:]]


def cached_tokens(usage: Any) -> tuple[int | None, int | None]:
    """The input tokens a reply's usage says were read from the provider's prompt cache, and
    those written to it (Anthropic bills writes above the input price); None for none.

    litellm reports reads as ``prompt_tokens_details.cached_tokens`` for every provider and
    Anthropic's as ``cache_read_input_tokens`` too; writes as ``cache_creation_input_tokens``."""
    read = getattr(usage, "cache_read_input_tokens", None)
    if not isinstance(read, int) or not read:
        details = getattr(usage, "prompt_tokens_details", None)
        read = getattr(details, "cached_tokens", None)
    written = getattr(usage, "cache_creation_input_tokens", None)
    return (
        read if isinstance(read, int) and read > 0 else None,
        written if isinstance(written, int) and written > 0 else None,
    )
