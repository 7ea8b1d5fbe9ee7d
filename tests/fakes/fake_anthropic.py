"""A fake Anthropic Messages server (``POST /v1/messages``) for tests and benchmarks.

The scripting, recording and lifecycle are :class:`~tests.fakes.fake_openai.FakeOpenAI`'s (rules
match the prompt text, the system prompt included); replies are Anthropic ``message`` bodies.
A request forcing a tool (how litellm asks Claude for a JSON schema) is answered with that tool's
``tool_use`` block. Usage accounts ``cache_control`` marks as Anthropic does
(:class:`~tests.fakes.prompt_cache.MarkedCache`): ``cache_read_input_tokens``,
``cache_creation_input_tokens`` and the uncached rest as ``input_tokens``.

Example::

    with FakeAnthropic() as server:  # litellm: model="anthropic/claude-haiku-4-5", api_base=server.url
        ...
"""

from __future__ import annotations

import json
from typing import Any

from .fake_openai import FakeOpenAI, RecordedRequest, Reply
from .prompt_cache import MarkedCache

__all__ = ["FakeAnthropic"]


class FakeAnthropic(FakeOpenAI):
    """A scriptable Anthropic Messages server on ``127.0.0.1:0``; ``min_cache_tokens`` is the
    shortest prefix the cache keeps (1,024 for most Claude models, more for some)."""

    PATHS = ("/v1/messages",)

    def __init__(self, *, default: Reply | None = None, min_cache_tokens: int = 1024) -> None:
        super().__init__(default=default, model="claude-fake")
        self.cache = MarkedCache(min_tokens=min_cache_tokens)

    @property
    def url(self) -> str:
        """The server's root, the ``api_base`` litellm's Anthropic provider takes."""
        return self.base_url.removesuffix("/v1")

    def _completion(self, request: RecordedRequest, reply: Reply) -> dict[str, Any]:
        body = request.body
        choice = body.get("tool_choice")
        forced = choice.get("name") if isinstance(choice, dict) and choice.get("type") == "tool" else None
        content: list[dict[str, Any]]
        if reply.kind == "json" and forced:
            content = [{"type": "tool_use", "id": f"toolu_{len(self.requests)}", "name": forced, "input": reply.value}]
            text = json.dumps(reply.value)
        else:
            text = json.dumps(reply.value) if reply.kind == "json" else str(reply.value)
            structured = forced or body.get("output_format")
            if reply.kind == "json" and (not structured if reply.fenced is None else reply.fenced):
                text = f"Here is my verdict:\n```json\n{text}\n```"
            content = [{"type": "text", "text": text}]
        usage = dict(reply.usage) if reply.usage else self.cache.usage(body)
        usage.setdefault("output_tokens", max(1, len(text) // 4))
        return {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": str(body.get("model") or self.model),
            "content": content,
            "stop_reason": "tool_use" if forced and reply.kind == "json" else "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }
