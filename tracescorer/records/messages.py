"""Messages as the store keeps them (``{role, content, parts}`` dicts read back from JSON)."""

from __future__ import annotations

from typing import Any


def message_text(message: Any) -> str:
    """The readable text of a stored message: its content, else its text parts (tool calls are
    shown from the run's tool calls)."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str) and content.strip():
        return content
    pieces = [
        str(part["content"])
        for part in message.get("parts") or []
        if isinstance(part, dict) and part.get("type") == "text" and part.get("content")
    ]
    return " ".join(pieces)
