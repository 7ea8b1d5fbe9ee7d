"""Build :class:`AgentRun` objects from what the readers found in one trace.

The shared core of every adapter. Given the agent spans (or, without any, the outermost
LLM-bearing spans) it gathers each run's own model calls and tool executions — nested agent
subtrees excluded, they are runs of their own — and decides:

- *system messages*: the agent's instructions, else the system messages the model got;
- *history vs new input*: what the model was given before this run vs what this run added
  (compared against the agent's own input when the agent span states it);
- *output*: the assistant messages of this run in order (tool-only turns have empty text);
- *tool calls*: the model's tool-call parts joined with tool execution spans and tool results.

Model calls that are not part of the agent's main line (a memory title-generation call, say)
are told apart by their input: they do not contain the run's user input, or they carry other
system instructions than the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from tracescorer.conventions import nesting
from tracescorer.conventions.base import (
    AgentInfo,
    AgentReader,
    LlmCall,
    LlmReader,
    ToolExec,
    ToolReader,
    TraceView,
    run_id_for,
)
from tracescorer.conventions.common import (
    ASSISTANT,
    SYSTEM,
    USER,
    any_content,
    dedupe,
    has_content,
    is_genuine_user,
    last_user_block,
    split_history,
    split_system,
    unwrap_result,
)
from tracescorer.conventions.context import CONVERSATION_KEYS, RESOURCE_KEYS, find_id
from tracescorer.model import AgentRun, Message, Span, ToolCall

_START_END = attrgetter("start_time_unix_nano", "end_time_unix_nano")
_CALL_ORDER = attrgetter("span.start_time_unix_nano", "span.end_time_unix_nano")


@dataclass(frozen=True, slots=True, kw_only=True)
class Readers:
    """The readers of the conventions present in a trace, each list tried in order."""

    agents: tuple[AgentReader, ...]
    llm_calls: tuple[LlmReader, ...]
    tools: tuple[ToolReader, ...]
    roots: tuple[AgentReader, ...] = ()


class _Cache:
    """Reader results per span id, so each span is parsed once per extraction."""

    def __init__(self, trace: TraceView, readers: Readers) -> None:
        self.trace = trace
        self.readers = readers
        self._llm: dict[str, LlmCall | None] = {}
        self._tool: dict[str, ToolExec | None] = {}

    def llm(self, span: Span) -> LlmCall | None:
        sid = span.span_id
        if sid not in self._llm:
            found = None
            for read in self.readers.llm_calls:
                got = read(span, self.trace)
                if got is not None:
                    found = got if isinstance(got, LlmCall) else None
                    break
            self._llm[sid] = found
        return self._llm[sid]

    def tool(self, span: Span) -> ToolExec | None:
        sid = span.span_id
        if sid not in self._tool:
            found = None
            for read in self.readers.tools:
                got = read(span, self.trace)
                if got is not None:
                    found = got if isinstance(got, ToolExec) else None
                    break
            self._tool[sid] = found
        return self._tool[sid]

    def is_llm(self, span: Span) -> bool:
        return self.llm(span) is not None

    def is_tool(self, span: Span) -> bool:
        return self.tool(span) is not None


def find_agents(trace: TraceView, readers: Readers) -> dict[str, AgentInfo]:
    """Every span some agent reader recognises (the first reader to answer wins)."""
    agents: dict[str, AgentInfo] = {}
    for span in trace.spans:
        for read in readers.agents:
            info = read(span, trace)
            if info is not None:
                if isinstance(info, AgentInfo):
                    agents[span.span_id] = info
                break
    return agents


def build_runs(trace: TraceView, convention: str, readers: Readers) -> list[AgentRun]:
    """All runs of ``trace``, labelled ``convention``; nested-agent rules from :mod:`.nesting`."""
    cache = _Cache(trace, readers)
    found = find_agents(trace, readers)
    fallback = not found
    if fallback:
        agents = nesting.fallback_roots(
            trace, is_model_call=cache.is_llm, is_tool=cache.is_tool, root_readers=readers.roots
        )
    else:
        agents = nesting.resolve(trace, found, is_model_call=cache.is_llm, root_readers=readers.roots)
    # Spans another run claims (its extra spans) are not part of the runs around them.
    claimed = {x.span_id for info in agents.values() for x in info.extra_spans}
    runs = [_build_one(info, trace, cache, agents, claimed, convention, fallback) for info in agents.values()]
    runs.sort(key=lambda r: (r.started_at, r.span_id))
    return runs


# --- one run ----------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class _Gathered:
    """What belongs to one run: its spans, model calls (merged, main line) and tool executions."""

    own: list[Span]
    calls: list[LlmCall]
    main: list[LlmCall]
    tools: list[ToolExec]
    usage: dict[str, int | float] | None
    #: the agent's own record of the exchange, when it carries content
    transcript: list[Message]


def _build_one(
    info: AgentInfo,
    trace: TraceView,
    cache: _Cache,
    agents: dict[str, AgentInfo],
    claimed: set[str],
    convention: str,
    fallback: bool,
) -> AgentRun:
    span = info.span
    got = _gather(info, trace, cache, agents, claimed, fallback)
    system, tagged = _system(info, got)
    history, new_input, produced = _history_and_input(info, got)
    turns = _turns(info, got, produced)
    output = [m for m in turns if has_content(m)]
    # Tool calls from every assistant turn, content or not: ids and names are structure.
    tool_calls = _tool_calls(turns, produced, got.main, got.tools)
    conversation_id, resource_id = _ids(info, trace, got.own)
    attributes = _attributes(
        info, got, captured=bool(new_input or history or system or output), incomplete=trace.incomplete
    )
    model = (
        info.model
        or next((c.model for c in got.main if c.model), None)
        or next((c.model for c in got.calls if c.model), None)
    )
    status, error = _status(span)
    return AgentRun(
        run_id=run_id_for(span.trace_id, span.span_id),
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_span_id=trace.nearest(span, agents) or span.parent_span_id,
        conversation_id=conversation_id,
        resource_id=resource_id,
        agent_name=info.name,
        agent_id=info.id,
        service_name=span.service_name,
        convention=convention,
        model=model,
        started_at=span.start_time_unix_nano,
        ended_at=span.end_time_unix_nano,
        status=status,
        error=error,
        input_messages=tuple(new_input),
        remembered_messages=tuple(history),
        system_messages=tuple(system),
        tagged_system_messages=tagged,
        output=tuple(output),
        tool_calls=tuple(tool_calls),
        usage=info.usage or got.usage,
        attributes=attributes,
    )


def _gather(
    info: AgentInfo, trace: TraceView, cache: _Cache, agents: dict[str, AgentInfo], claimed: set[str], fallback: bool
) -> _Gathered:
    """The run's own spans (nested runs' subtrees excluded), model calls and tools."""
    span = info.span
    if claimed:

        def stop(s: Span) -> bool:
            return s.span_id in agents or s.span_id in claimed

        own = trace.descendants(span, stop=stop)
        for extra in info.extra_spans:
            own += [extra, *trace.descendants(extra, stop=stop)]
        own.sort(key=_START_END)
    else:
        own = trace.descendants(span, stop=lambda s: s.span_id in agents)
    # A fallback root may itself be the model call; a declared agent span never is.
    candidates = [span] if fallback and cache.llm(span) is not None else []
    candidates += [s for s in own if cache.llm(s) is not None]
    calls, usage = _merge_nested(candidates, trace, cache)
    tools = [t for t in (cache.tool(s) for s in own) if t is not None]
    # The agent's own record of the exchange, unless it is only the shape of one (content
    # capture off in the framework): then the model calls tell, and may have the content.
    transcript = info.transcript if any_content(info.transcript) else []
    return _Gathered(
        own=own, calls=calls, main=_main_line(calls, info), tools=tools, usage=usage, transcript=transcript
    )


def _system(info: AgentInfo, got: _Gathered) -> tuple[list[Message], dict[str, tuple[Message, ...]]]:
    """The agent's instructions (else what the model was told), and other system messages the
    model got (memory, working memory, processors), kept apart as ``model_context``."""
    system = [m for m in info.system if has_content(m)]
    if not system:
        for call in got.main:
            sys_msgs = [m for m in call.system + call.input if m.role == SYSTEM and has_content(m)]
            if sys_msgs:
                system = sys_msgs
                break
    if not system and got.transcript:
        system = [m for m in got.transcript if m.role == SYSTEM and has_content(m)]
    system = dedupe(system)
    known = {m.content for m in system}
    extra = dedupe(
        m
        for c in got.main
        for m in c.system + c.input
        if m.role == SYSTEM and has_content(m) and m.content not in known
    )
    return system, ({"model_context": tuple(extra)} if extra else {})


def _history_and_input(info: AgentInfo, got: _Gathered) -> tuple[list[Message], list[Message], list[Message]]:
    """(history, new input, messages produced in this run).

    Messages are split by their structure (roles, tool turns) even where their content was not
    captured, so this run's own tool round-trip never reads as history; then only messages that
    carry content are kept.
    """
    produced: list[Message] = []
    if got.transcript:
        _, transcript = split_system(got.transcript)
        history, new_input, produced = split_history(transcript, info.new_input)
    else:
        # The new input is what the agent span says it got (only the new turn, or the last user
        # block of what it was given); history is what the *model* got before it — a framework
        # may add remembered messages the agent span does not list.
        anchor = list(info.new_input)
        _, agent_given = split_system(info.given)
        if not anchor and agent_given:
            _, anchor, _ = split_history(agent_given)
        call_input = next((c.input for c in got.main if c.input), [])
        _, given = split_system(call_input or agent_given)
        history, new_input, _ = split_history(given, anchor)
    if not new_input and info.new_input:
        new_input = list(info.new_input)
    new_input = [m for m in new_input if has_content(m)]
    history = [m for m in history if has_content(m)]
    return history, new_input, produced


def _turns(info: AgentInfo, got: _Gathered, produced: list[Message]) -> list[Message]:
    """The run's assistant turns: the agent's own record, else the model calls', else the agent's
    stated output; then the answer the framework gave apart from them (a final-answer tool)."""
    turns = [m for m in produced if m.role == ASSISTANT]
    if not turns:
        turns = [m for c in got.main for m in c.output if m.role == ASSISTANT]
    if not turns:
        turns = [m for m in info.output if m.role == ASSISTANT]
    if info.answer and not (turns and turns[-1].content and turns[-1].content == info.answer[-1].content):
        turns = [*turns, *info.answer]
    return turns


def _ids(info: AgentInfo, trace: TraceView, own: list[Span]) -> tuple[str | None, str | None]:
    """(conversation id, resource id): configured keys win over what the convention says, then
    the agent span's own id, then the well-known keys on the span, its ancestors, its subtree."""
    span = info.span
    keys = trace.facts.keys
    ancestors = list(trace.ancestors(span))
    conversation_id = (
        (find_id(span, ancestors, own, (), trace.conversation_keys, keys) if trace.conversation_keys else None)
        or info.conversation_id
        or find_id(span, ancestors, own, CONVERSATION_KEYS, present=keys)
    )
    resource_id = info.resource_id or find_id(span, ancestors, own, RESOURCE_KEYS, present=keys)
    return conversation_id, resource_id


def _attributes(info: AgentInfo, got: _Gathered, *, captured: bool, incomplete: bool) -> dict[str, Any]:
    attributes: dict[str, Any] = dict(info.attributes)
    attributes["tracescorer.llm_calls"] = len(got.calls)
    # Content capture off (or masked): nothing but structure was left, so no message at all.
    if not captured:
        attributes["tracescorer.content_captured"] = False
    if incomplete:
        attributes["tracescorer.incomplete"] = True
    return attributes


def _merge_nested(
    candidates: list[Span], trace: TraceView, cache: _Cache
) -> tuple[list[LlmCall], dict[str, int | float] | None]:
    """One call per model invocation when several nested spans describe it, and total usage.

    Mastra, for instance, wraps one model call in ``model_generation`` > ``model_step`` >
    ``chat`` spans, each holding part of the story. A candidate with exactly one candidate
    below it is merged into it (the inner span's data wins, the outer fills gaps); a candidate
    with several below is an aggregate over steps and is dropped — its usage counts only when
    none of the steps reported any, so tokens are never counted twice.
    """
    ids = {s.span_id for s in candidates}
    kids: dict[str, list[str]] = {}
    parent_of: dict[str, str | None] = {}
    if len(candidates) > 1:
        for s in candidates:
            p = trace.nearest(s, ids)
            parent_of[s.span_id] = p
            if p is not None:
                kids.setdefault(p, []).append(s.span_id)
    if not kids:  # no call inside another: each is one model call (nothing to merge)
        calls = [c for c in map(cache.llm, candidates) if c is not None]
        calls.sort(key=_CALL_ORDER)
        return calls, _sum_usage([c.usage for c in calls])
    depth = trace.depth
    merged: dict[str, LlmCall] = {}
    #: usage reported at or below each resolved candidate
    usage_below: dict[str, dict[str, int | float] | None] = {}
    for s in sorted(candidates, key=lambda s: -depth.get(s.span_id, 0)):  # innermost first
        call = cache.llm(s)
        assert call is not None
        children = kids.get(s.span_id, [])
        if not children:
            merged[s.span_id] = _copy(call)
            usage_below[s.span_id] = call.usage
        elif len(children) == 1 and children[0] in merged:
            inner = merged.pop(children[0])
            _fill(inner, call)
            merged[s.span_id] = inner
            usage_below[s.span_id] = inner.usage
        else:
            below = _sum_usage([usage_below.get(c) for c in children])
            usage_below[s.span_id] = below or call.usage
    tops = [s.span_id for s in candidates if parent_of[s.span_id] is None]
    out = list(merged.values())
    out.sort(key=_CALL_ORDER)
    return out, _sum_usage([usage_below.get(t) for t in tops])


def _copy(call: LlmCall) -> LlmCall:
    return LlmCall(
        span=call.span,
        input=list(call.input),
        system=list(call.system),
        output=list(call.output),
        model=call.model,
        usage=call.usage,
        content_captured=call.content_captured,
    )


def _fill(inner: LlmCall, outer: LlmCall) -> None:
    if not inner.input:
        inner.input = list(outer.input)
    if not inner.system:
        inner.system = list(outer.system)
    if not inner.output:
        inner.output = list(outer.output)
    inner.model = inner.model or outer.model
    inner.usage = inner.usage or outer.usage


def _system_key(call: LlmCall) -> str:
    for m in call.system + call.input:
        if m.role == SYSTEM:
            return m.content.strip()
    return ""


def _user_keys(messages: Sequence[Message]) -> set[str]:
    """The texts of the genuine user turns that carry content (an uncaptured turn matches any)."""
    out = set()
    for m in messages:
        if m.role == USER and (m.content or (is_genuine_user(m) and has_content(m))):
            out.add(m.content.strip())
    return out


def _main_line(calls: list[LlmCall], info: AgentInfo) -> list[LlmCall]:
    """The calls that make up the agent's own exchange, without helper calls.

    Calls of the main line share user turns: each step re-sends the conversation. Calls are
    clustered by shared genuine user messages; the cluster holding the agent's new input wins
    (else the one with the agent's instructions, its output, most calls). Inside it, a call
    with other system instructions than the agent's is a helper too.
    """
    with_input = [c for c in calls if c.input]
    if len(with_input) <= 1:
        return calls
    if not any(any_content(c.input) for c in with_input):
        return calls  # content capture off: nothing tells a helper call apart
    users = [_user_keys(c.input) for c in with_input]
    agent_system = {m.content.strip() for m in info.system if m.content}
    if all(users) and set.intersection(*users):
        # One conversation: every call re-sends a same user turn; only other instructions tell
        # a helper apart.
        if not agent_system:
            return calls
        best = with_input
    else:
        best = _best_cluster(with_input, users, info, agent_system)
    if agent_system:
        same = [c for c in best if not _system_key(c) or _system_key(c) in agent_system]
        best = same or best
    if len(best) == len(with_input):
        return calls
    keep = {id(c) for c in best}
    return [c for c in calls if not c.input or id(c) in keep]


def _best_cluster(
    with_input: list[LlmCall], users: list[set[str]], info: AgentInfo, agent_system: set[str]
) -> list[LlmCall]:
    """The calls of the cluster (calls sharing user turns) most likely the agent's own."""
    anchor = _user_keys(info.new_input)
    if not anchor:
        for source in (info.given, info.transcript):
            start, end = last_user_block(source)
            if start >= 0:
                anchor = {m.content.strip() for m in source[start:end] if has_content(m)}
                break
    # Union-find over calls sharing a user message.
    parent = list(range(len(with_input)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    seen: dict[str, int] = {}
    for i, keys in enumerate(users):
        for k in keys:
            if k in seen:
                parent[find(i)] = find(seen[k])
            else:
                seen[k] = i
    clusters: dict[int, list[int]] = {}
    for i in range(len(with_input)):
        clusters.setdefault(find(i), []).append(i)
    agent_output = {m.content.strip() for m in info.output if m.content}

    def score(members: list[int]) -> tuple[bool, bool, bool, int, int]:
        member_calls = [with_input[i] for i in members]
        return (
            any(users[i] & anchor for i in members),
            bool(agent_system) and any(_system_key(c) in agent_system for c in member_calls),
            bool(agent_output)
            and any(m.content.strip() in agent_output for c in member_calls for m in c.output if m.content),
            len(members),
            -min(members),
        )

    return [with_input[i] for i in max(clusters.values(), key=score)]


def _tool_calls(
    output: Sequence[Message], produced: Sequence[Message], main: Sequence[LlmCall], tools: list[ToolExec]
) -> list[ToolCall]:
    """Tool calls of the run: requested by the model, joined with executions and results."""
    found: dict[str, Any] | None = None

    def responses() -> dict[str, Any]:
        """Tool results in the run's messages by call id (looked up only when needed)."""
        nonlocal found
        if found is None:
            found = {}
            for msgs in [produced, *(c.input for c in main), output]:
                for m in msgs:
                    for p in m.parts:
                        if p.id and p.response is not None and p.type in ("tool_call_response", "tool_call"):
                            found.setdefault(p.id, p.response)
        return found

    requested = []
    seen_ids: set[str] = set()
    for m in output:
        for p in m.parts:
            if p.type != "tool_call" or not p.name:
                continue
            if p.id and p.id in seen_ids:
                continue
            if p.id:
                seen_ids.add(p.id)
            requested.append(p)

    unused = list(tools)
    out: list[ToolCall] = []
    for p in requested:
        match = _match_exec(p.id, p.name or "", p.arguments, unused)
        if match is not None:
            unused.remove(match)
        result = unwrap_result(
            match.result if match is not None and match.result is not None else responses().get(p.id or "")
        )
        out.append(
            ToolCall(
                id=p.id or (match.id if match else None),
                name=p.name or "",
                arguments=p.arguments if p.arguments is not None else (match.arguments if match else None),
                result=result,
                error=match.error if match else None,
            )
        )
    for t in unused:  # executions the model output did not show (content off, or agent-side)
        out.append(
            ToolCall(
                id=t.id,
                name=t.name,
                arguments=t.arguments,
                result=unwrap_result(t.result if t.result is not None else responses().get(t.id or "")),
                error=t.error,
            )
        )
    return out


def _match_exec(call_id: str | None, name: str, args: Any, execs: list[ToolExec]) -> ToolExec | None:
    if call_id:
        for t in execs:
            if t.id == call_id:
                return t
    same_name = [t for t in execs if t.name == name and (not call_id or not t.id)]
    for t in same_name:
        if t.arguments == args:
            return t
    return same_name[0] if same_name else None


def _sum_usage(usages: Sequence[dict[str, int | float] | None]) -> dict[str, int | float] | None:
    total: dict[str, int | float] = {}
    for u in usages:
        for k, v in (u or {}).items():
            total[k] = total.get(k, 0) + v
    return total or None


def _status(span: Span) -> tuple[str, str | None]:
    if span.status_code != "error":
        return "ok", None
    message = span.status_message or None
    if not message:
        for ev in span.events:
            if ev.name == "exception":
                message = str(ev.attributes.get("exception.message") or ev.attributes.get("exception.type") or "")
                break
    return "error", message or "error"
