"""Judge input and output processors, and :class:`RedactPII`.

Input processors transform the chat messages just before they go to the model; output
processors transform the model's text reply before it is parsed. Both may be sync or async
and are called on the event loop (keep them quick; they run once per judge call).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

ChatMessage = dict[str, Any]
"""An OpenAI-style chat message: ``{"role": ..., "content": ...}``."""


@runtime_checkable
class InputProcessor(Protocol):
    """Transforms the judge's messages before the call.

    ``process_input`` gets a fresh list (it may mutate and return it, or return a new one) and
    returns the messages to send, or an awaitable of them.
    """

    def process_input(
        self, messages: list[ChatMessage]
    ) -> list[ChatMessage] | Awaitable[list[ChatMessage]]: ...


@runtime_checkable
class OutputProcessor(Protocol):
    """Transforms the judge's text reply before it is parsed; returns text or an awaitable."""

    def process_output(self, text: str) -> str | Awaitable[str]: ...


_PATTERNS: dict[str, tuple[str, re.Pattern[str]]] = {
    # order matters: tokens and cards before phone numbers (a card is also a digit run)
    "api_key": ("[REDACTED_API_KEY]", re.compile(
        r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{8,}=*"
        r"|\b(?:sk|pk|rk)-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,}"
        r"|\bAKIA[0-9A-Z]{16}\b"
        r"|\bgh[pousr]_[A-Za-z0-9]{30,}\b"
        r"|\bxox[abpr]-[A-Za-z0-9-]{10,}"
        r"|\bAIza[0-9A-Za-z_\-]{35}\b")),
    "email": ("[REDACTED_EMAIL]", re.compile(
        r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b")),
    "card": ("[REDACTED_CARD]", re.compile(r"\b(?:\d[ \-]?){12,18}\d\b")),
    "ip": ("[REDACTED_IP]", re.compile(
        r"\b(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)\b"
        r"|\b(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}\b")),
    "phone": ("[REDACTED_PHONE]", re.compile(
        # not inside a longer run of digit groups (order numbers, non-card digit strings)
        r"(?<![\w.])(?<!\d[ \-])(?:\+\d{1,3}[ .\-]?)?(?:\(\d{2,4}\)[ .\-]?|\d{2,4}[ .\-])"
        r"\d{3,4}[ .\-]?\d{3,4}(?![\w.])(?![ \-]\d)")),
}

PII_KINDS: tuple[str, ...] = tuple(_PATTERNS)


def _luhn_ok(digits: str) -> bool:
    total, parity = 0, len(digits) % 2
    for i, ch in enumerate(digits):
        d = int(ch)
        if i % 2 == parity:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


@dataclass(frozen=True, kw_only=True)
class RedactPII:
    """Input processor replacing personal data in the judge's messages with placeholders.

    Redacts ``kinds`` (default: every kind in :data:`PII_KINDS`: API keys and bearer tokens,
    emails, card numbers (Luhn-checked), IPv4/IPv6 addresses, phone numbers) with
    ``[REDACTED_<KIND>]``. Works on string contents and on ``{"type": "text"}`` content parts.
    """

    kinds: Sequence[str] = PII_KINDS

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(_PATTERNS)
        if unknown:
            raise ValueError(f"unknown PII kinds {sorted(unknown)}; known: {list(PII_KINDS)}")

    def redact(self, text: str) -> str:
        """``text`` with every configured kind of PII replaced."""
        for kind, (placeholder, pattern) in _PATTERNS.items():
            if kind not in self.kinds:
                continue
            if kind == "card":
                text = pattern.sub(lambda m: _card_sub(m, placeholder), text)
            else:
                text = pattern.sub(placeholder, text)
        return text

    def process_input(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        out: list[ChatMessage] = []
        for message in messages:
            content = message.get("content")
            if isinstance(content, str):
                message = {**message, "content": self.redact(content)}
            elif isinstance(content, list):
                message = {**message, "content": [
                    {**p, "text": self.redact(p["text"])}
                    if isinstance(p, dict) and isinstance(p.get("text"), str) else p
                    for p in content]}
            out.append(message)
        return out


def _card_sub(match: re.Match[str], placeholder: str) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    return placeholder if 13 <= len(digits) <= 19 and _luhn_ok(digits) else match.group(0)
