"""FakeOpenAI that can also answer like an agent's model: assistant turns with ``tool_calls``.

Reuses :class:`fakes.fake_openai.FakeOpenAI` (server, scripting, recording) and only adds a reply
kind. Matchers here look at the *last* message of a request, which is what decides an agent's
next step (a new user question -> call a tool; a tool result -> answer)::

    with AgentOpenAI() as server:
        server.script(last_user("weather in Paris"), tool_call("get_weather", {"city": "Paris"}, "call_1"))
        server.script(last_tool("call_1"), Reply.text("It is sunny in Paris."))
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

from fakes.fake_openai import FakeOpenAI, RecordedRequest, Reply, _content_text

__all__ = ["AUTO", "AgentOpenAI", "AutoAgentOpenAI", "Reply", "last_tool", "last_user", "tool_call"]

TOOL_CALLS = "tool_calls"
AUTO = Reply(kind="auto")


def tool_call(
    name: str, arguments: Mapping[str, Any], call_id: str, *, usage: Mapping[str, int] | None = None
) -> Reply:
    """An assistant turn with no text and one function tool call (``finish_reason: tool_calls``)."""
    return tool_calls([(name, arguments, call_id)], usage=usage)


def tool_calls(calls: list[tuple[str, Mapping[str, Any], str]], *, usage: Mapping[str, int] | None = None) -> Reply:
    """An assistant turn carrying several function tool calls ``(name, arguments, id)``."""
    value = [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(dict(args))}}
        for name, args, cid in calls
    ]
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


#: Argument values the auto agent recognises in a user turn, by parameter-name hint.
CITIES = ("Paris", "Berlin", "Tokyo", "Rome", "London", "Madrid", "Lisbon", "Oslo")
_ORDER = re.compile(r"\b[A-Z]-\d{4}\b")


def _tools(body: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(name, JSON-schema parameters) of the function tools a request offers."""
    out = []
    for tool in body.get("tools") or ():
        fn = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            out.append((fn["name"], params if isinstance(params, Mapping) else {}))
    return out


def _entity(param: str, text: str) -> str | None:
    hint = param.lower()
    if "city" in hint or "location" in hint or "place" in hint:
        found = [(text.find(c), c) for c in CITIES if c in text]
        return min(found)[1] if found else None
    if "order" in hint:
        m = _ORDER.search(text)
        return m.group(0) if m else None
    return text  # free text parameters (agent-as-tool requests, queries) get the whole turn


def _arguments(params: Mapping[str, Any], text: str) -> dict[str, Any] | None:
    """Arguments filled from ``text``, or None when a required one has no value there."""
    props = params.get("properties")
    props = props if isinstance(props, Mapping) else {}
    required = [p for p in (params.get("required") or ()) if p in props] or list(props)[:1]
    args: dict[str, Any] = {}
    for name in required:
        value = _entity(name, text)
        if value is None:
            return None
        args[name] = value
    return args


class AutoAgentOpenAI(AgentOpenAI):
    """An :class:`AgentOpenAI` whose unscripted replies behave like a simple tool-using agent.

    Deterministic, so captures from real frameworks can be written down by hand:

    - the last message is a tool result: answer ``Result from <tool>: <result>`` (several
      results after one assistant turn are joined with ``; ``), as the argument of a call to the
      ``final_answer`` tool where one is offered (an agent that answers through it: BeeAI);
    - the last message is a user turn and tools are offered: call the first tool whose name
      appears in the turn (``transfer_to_x`` handoffs, agent-as-tool), else the first tool
      whose required arguments the turn supplies (a known city for ``city``/``location``, an
      order id ``X-0000`` for ``order*``, the whole turn for other parameters); call ids are
      ``call_<tool>_<n>``, numbered per server;
    - otherwise: ``You said: <last user text>``;
    - a code agent (no tools offered, the system prompt asks for code in ``<code>`` tags and
      lists its tools as Python stubs, as smolagents' CodeAgent does): see :func:`code_agent_reply`.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("default", AUTO)
        super().__init__(**kwargs)
        self._ids = itertools.count(1)
        self._ids_lock = threading.Lock()

    def _completion(self, request: RecordedRequest, reply: Reply) -> dict[str, Any]:
        if reply.kind == AUTO.kind:
            reply = self.decide(request)
        return super()._completion(request, reply)

    def decide(self, request: RecordedRequest) -> Reply:
        msgs = [m for m in request.messages if isinstance(m, Mapping)]
        if not msgs:
            return Reply.text("Hello.")
        code = code_agent_reply(msgs) if not request.body.get("tools") else None
        if code is not None:
            return code
        last = msgs[-1]
        if last.get("role") in ("tool", "function"):
            answer = self._tool_answer(msgs)
            final = next((params for name, params in _tools(request.body) if name == "final_answer"), None)
            if final is None:
                return Reply.text(answer)
            with self._ids_lock:  # an agent that answers through its final_answer tool (BeeAI)
                n = next(self._ids)
            return tool_call("final_answer", _arguments(final, answer) or {}, f"call_final_answer_{n}")
        text = _content_text(last.get("content"))
        if last.get("role") == "user":
            tools = _tools(request.body)
            named = [t for t in tools if t[0].lower() in text.lower() or t[0].lower().replace("_", " ") in text.lower()]
            for name, params in named + tools:
                args = _arguments(params, text) if (name, params) not in named else (_arguments(params, text) or {})
                if args is not None:
                    with self._ids_lock:
                        n = next(self._ids)
                    return tool_call(name, args, f"call_{name}_{n}")
        user = next((m for m in reversed(msgs) if m.get("role") == "user"), last)
        return Reply.text(f"You said: {_content_text(user.get('content'))}")

    @staticmethod
    def _tool_answer(msgs: list[Mapping[str, Any]]) -> str:
        names: dict[str, str] = {}
        results: list[tuple[str, str]] = []
        for m in msgs:
            if m.get("role") == "assistant":
                results = []
                for call in m.get("tool_calls") or ():
                    fn = call.get("function") or {}
                    names[str(call.get("id"))] = str(fn.get("name"))
            elif m.get("role") in ("tool", "function"):
                name = names.get(str(m.get("tool_call_id")), str(m.get("name") or "tool"))
                results.append((name, _content_text(m.get("content"))))
        return "; ".join(f"Result from {n}: {r}" for n, r in results)


#: A tool as a code agent's prompt lists it: ``def get_weather(city: string) -> string:``.
_CODE_STUB = re.compile(r"^\s*def ([A-Za-z_]\w*)\(([^)]*)\)\s*->", re.MULTILINE)
#: A parameter name of a stub (a type such as ``dict[str, Any]`` has commas of its own).
_PARAM = re.compile(r"(?:^|,)\s*([A-Za-z_]\w*)\s*:")
_NEW_TASK = "New task:"


def code_agent_reply(msgs: list[Mapping[str, Any]]) -> Reply | None:
    """The code a code agent's model writes (smolagents' CodeAgent: code between ``<code>`` tags,
    tools called as Python functions, ``final_answer`` ends the task), or None for other agents.

    For a new task: ``result = <tool>(<arguments>)`` with the first tool named in the task, else
    the first whose parameters the task fills (as :class:`AutoAgentOpenAI` picks tool calls);
    once that code ran: ``final_answer(f"Result from <tool>: {result}")`` (the executor keeps
    ``result``). Without a fitting tool: ``final_answer("You said: <task>")``.
    """
    system = _content_text(msgs[0].get("content")) if msgs[0].get("role") == "system" else ""
    if "<code>" not in system or "final_answer" not in system:
        return None
    # smolagents merges a new task into the previous observation's user turn: the last one wins
    start = max((i for i, m in enumerate(msgs) if _NEW_TASK in _content_text(m.get("content"))), default=-1)
    if start < 0:
        return None
    task = _content_text(msgs[start].get("content")).rsplit(_NEW_TASK, 1)[1].strip()
    for m in msgs[start + 1 :]:
        called = re.search(r"result = ([A-Za-z_]\w*)\(", _content_text(m.get("content")))
        if m.get("role") == "assistant" and called:
            answer = f'final_answer(f"Result from {called.group(1)}: {{result}}")'
            return Reply.text(f"Thought: I have the result.\n<code>\n{answer}\n</code>")
    stubs = [(name, _PARAM.findall(params)) for name, params in _CODE_STUB.findall(system) if name != "final_answer"]
    named = [t for t in stubs if t[0].lower() in task.lower()]
    for name, params in named + stubs:
        wanted = [p for p in params if p != "additional_args"]
        args = {p: _entity(p, task) for p in wanted}
        if all(v is not None for v in args.values()):
            call = ", ".join(f"{k}={v!r}" for k, v in args.items())
            return Reply.text(f"Thought: I will use {name}.\n<code>\nresult = {name}({call})\nprint(result)\n</code>")
    return Reply.text(f"Thought: No tool fits.\n<code>\nfinal_answer({('You said: ' + task)!r})\n</code>")
