"""Judge input and output processors (:class:`RedactPII` lives in :mod:`.pii`).

Input processors transform the chat messages just before they go to the model; output
processors transform the model's text reply before it is parsed. Both may be sync or async
and are called on the event loop (keep them quick; they run once per judge call).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol, runtime_checkable

from tracescorer.scorers.pii import RedactPII

ChatMessage = dict[str, Any]
"""An OpenAI-style chat message: ``{"role": ..., "content": ...}``."""


@runtime_checkable
class InputProcessor(Protocol):
    """Transforms the judge's messages before the call.

    ``process_input`` gets a fresh list (it may mutate and return it, or return a new one) and
    returns the messages to send, or an awaitable of them.
    """

    def process_input(self, messages: list[ChatMessage]) -> list[ChatMessage] | Awaitable[list[ChatMessage]]: ...


@runtime_checkable
class OutputProcessor(Protocol):
    """Transforms the judge's text reply before it is parsed; returns text or an awaitable."""

    def process_output(self, text: str) -> str | Awaitable[str]: ...


@runtime_checkable
class Redactor(Protocol):
    """An input processor that also reports what it redacted (:class:`RedactPII` is one).

    The judge calls ``redact_messages`` instead of ``process_input`` and records the counts by
    kind in ``JudgeCall.redactions``, so a stored score says redaction ran.
    """

    def redact_messages(self, messages: list[ChatMessage]) -> tuple[list[ChatMessage], dict[str, int]]: ...


__all__ = ["ChatMessage", "InputProcessor", "OutputProcessor", "RedactPII", "Redactor"]
