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

from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from tracescorer.conventions import nesting
from tracescorer.conventions.answers import FINAL_ANSWER_TOOLS, answer_text, with_answers
from tracescorer.conventions.base import (
    AgentInfo,
    LlmCall,
    ToolExec,
    TraceView,
    run_id_for,
)
from tracescorer.conventions.common import (
    ASSISTANT,
    SYSTEM,
    any_content,
    dedupe,
    has_content,
    split_history,
    split_system,
    text_message,
)
from tracescorer.conventions.context import CONVERSATION_KEYS, RESOURCE_KEYS, find_id
from tracescorer.conventions.mainline import main_line, merge_nested
from tracescorer.conventions.reading import ReaderCache, Readers
from tracescorer.conventions.toolcalls import join_tool_calls
from tracescorer.model import AgentRun, Message, Span

_START_END = attrgetter("start_time_unix_nano", "end_time_unix_nano")


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
    cache = ReaderCache(trace, readers)
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
    cache: ReaderCache,
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
    tool_calls = join_tool_calls(turns, produced, got.main, got.tools)
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
    info: AgentInfo,
    trace: TraceView,
    cache: ReaderCache,
    agents: dict[str, AgentInfo],
    claimed: set[str],
    fallback: bool,
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
    llm, tool = cache.llm, cache.tool
    for s in own:
        if llm(s) is not None:
            candidates.append(s)
    calls, usage = merge_nested(candidates, trace, cache)
    tools: list[ToolExec] = []
    for s in own:
        t = tool(s)
        if t is not None:
            tools.append(t)
    # The agent's own record of the exchange, unless it is only the shape of one (content
    # capture off in the framework): then the model calls tell, and may have the content.
    transcript = info.transcript if any_content(info.transcript) else []
    return _Gathered(own=own, calls=calls, main=main_line(calls, info), tools=tools, usage=usage, transcript=transcript)


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
    history = [m for m in with_answers(history) if has_content(m)]
    return history, new_input, produced


def _turns(info: AgentInfo, got: _Gathered, produced: list[Message]) -> list[Message]:
    """The run's assistant turns: the agent's own record, else the model calls', else the agent's
    stated output; then the answer the framework gave apart from them (a final-answer tool)."""
    turns = [m for m in produced if m.role == ASSISTANT]
    if not turns:
        turns = [m for c in got.main for m in c.output if m.role == ASSISTANT]
    if not turns:
        turns = [m for m in info.output if m.role == ASSISTANT]
    answer = info.answer or _final_answer(info, turns)
    if answer and not (turns and turns[-1].content and turns[-1].content == answer[-1].content):
        turns = [*turns, *answer]
    return turns


def _final_answer(info: AgentInfo, turns: list[Message]) -> list[Message]:
    """The answer of a run whose last turn calls a final-answer tool: the agent's stated output,
    else the call's argument."""
    calls = [c for c in turns[-1].tool_calls if c.name in FINAL_ANSWER_TOOLS] if turns else []
    if not calls:
        return []
    stated = [m for m in info.output if m.role == ASSISTANT and m.content]
    if stated:
        return stated[-1:]
    answer = answer_text(calls[-1].arguments)
    return [text_message(ASSISTANT, answer)] if answer else []


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
