"""Provider prompt caching as the fake LLM servers account it (tokens counted as 4 characters).

:class:`AutomaticCache` is OpenAI's: the longest prefix already seen, of at least 1,024 tokens,
in steps of 128 tokens, is read from the cache; every request adds its prefixes. :class:`MarkedCache`
is Anthropic's: only prefixes ending at a block marked ``cache_control`` are cached (tools, then the
system blocks, then the messages' blocks, in that order); the longest marked prefix seen before is
read, the last marked prefix is written when it is new and long enough (``min_tokens``).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from typing import Any

CHARS_PER_TOKEN = 4


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


class AutomaticCache:
    """OpenAI's automatic prefix caching over the prompt text: :meth:`cached` is the tokens read."""

    def __init__(self, *, min_tokens: int = 1024, step_tokens: int = 128) -> None:
        self.min_tokens = min_tokens
        self.step_tokens = step_tokens
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()

    def cached(self, text: str) -> int:
        """The tokens of ``text``'s longest prefix seen before (0 below ``min_tokens``); remembers
        ``text``'s prefixes."""
        tokens = len(text) // CHARS_PER_TOKEN
        bounds = range(self.min_tokens, tokens + 1, self.step_tokens)
        digests = [(b, _digest(text[: b * CHARS_PER_TOKEN])) for b in bounds]
        with self._lock:
            hit = max((b for b, d in digests if d in self._seen), default=0)
            self._seen.update(d for _, d in digests)
        return hit


def _blocks(body: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """An Anthropic Messages request as (text, marked) blocks in cache order."""
    out: list[tuple[str, bool]] = [
        (json.dumps(t, sort_keys=True), "cache_control" in t) for t in body.get("tools") or () if isinstance(t, dict)
    ]
    system = body.get("system")
    parts: list[Any] = [system] if isinstance(system, str) else list(system or ())
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        parts.extend([content] if isinstance(content, str) else list(content or ()))
    for part in parts:
        if isinstance(part, str):
            out.append((part, False))
        elif isinstance(part, dict):
            text = part.get("text") if isinstance(part.get("text"), str) else json.dumps(part, sort_keys=True)
            out.append((text, "cache_control" in part))
    return out


class MarkedCache:
    """Anthropic's prompt caching up to ``cache_control`` marks."""

    def __init__(self, *, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()

    def usage(self, body: Mapping[str, Any]) -> dict[str, int]:
        """``input_tokens`` (not cached), ``cache_read_input_tokens`` and
        ``cache_creation_input_tokens`` of a Messages request; remembers what it writes."""
        text, marks = "", []
        for block, marked in _blocks(body):
            text += block
            if marked:
                marks.append(text)
        total = len(text) // CHARS_PER_TOKEN
        read = written = 0
        with self._lock:
            for prefix in reversed(marks):
                if _digest(prefix) in self._seen:
                    read = len(prefix) // CHARS_PER_TOKEN
                    break
            if marks and len(marks[-1]) // CHARS_PER_TOKEN >= self.min_tokens:
                last = _digest(marks[-1])
                if last not in self._seen:
                    self._seen.add(last)
                    written = len(marks[-1]) // CHARS_PER_TOKEN - read
        return {
            "input_tokens": max(0, total - read - written),
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
        }
