"""FakeOpenAI that can also answer like an agent's model: assistant turns with ``tool_calls``.

Reuses :class:`fakes.fake_openai.FakeOpenAI` (server, scripting, recording) and only adds a reply
kind. Matchers here look at the *last* message of a request, which is what decides an agent's
next step (a new user question -> call a tool; a tool result -> answer)::

    with AgentOpenAI() as server:
        server.script(last_user("weather in Paris"), tool_call("get_weather", {"city": "Paris"}, "call_1"))
        server.script(last_tool("call_1"), Reply.text("It is sunny in Paris."))
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from fakes.fake_openai import FakeOpenAI, RecordedRequest, Reply, _content_text

__all__ = ["AgentOpenAI", "Reply", "last_tool", "last_user", "tool_call"]

TOOL_CALLS = "tool_calls"


def tool_call(name: str, arguments: Mapping[str, Any], call_id: str, *,
              usage: Mapping[str, int] | None = None) -> Reply:
    """An assistant turn with no text and one function tool call (``finish_reason: tool_calls``)."""
    return tool_calls([(name, arguments, call_id)], usage=usage)


def tool_calls(calls: list[tuple[str, Mapping[str, Any], str]], *,
               usage: Mapping[str, int] | None = None) -> Reply:
    """An assistant turn carrying several function tool calls ``(name, arguments, id)``."""
    value = [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(dict(args))}}
             for name, args, cid in calls]
    return Reply(kind=TOOL_CALLS, value=value, usage=usage)


def _last(request: RecordedRequest) -> dict[str, Any]:
    msgs = request.messages
    return msgs[-1] if msgs and isinstance(msgs[-1], dict) else {}


def last_user(text: str) -> Callable[[RecordedRequest], bool]:
    """Matches a request whose last message is a user message containing ``text``."""
    def match(request: RecordedRequest) -> bool:
        last = _last(request)
        return last.get("role") == "user" and text in _content_text(last.get("content"))
    return match


def last_tool(call_id: str) -> Callable[[RecordedRequest], bool]:
    """Matches a request whose last message is the result of tool call ``call_id``."""
    def match(request: RecordedRequest) -> bool:
        last = _last(request)
        return last.get("role") == "tool" and last.get("tool_call_id") == call_id
    return match


class AgentOpenAI(FakeOpenAI):
    """:class:`FakeOpenAI` plus the ``tool_calls`` reply kind (see :func:`tool_call`)."""

    def _completion(self, request: RecordedRequest, reply: Reply) -> dict[str, Any]:
        if reply.kind != TOOL_CALLS:
            return super()._completion(request, reply)
        body = super()._completion(request, Reply.text("", usage=reply.usage))
        choice = body["choices"][0]
        choice["finish_reason"] = "tool_calls"
        choice["message"] = {"role": "assistant", "content": None, "tool_calls": list(reply.value)}
        return body
