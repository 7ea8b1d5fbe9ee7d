"""Which model calls of a run are its main line, and nested calls merged into the call that made them.

A framework may record one model call twice (its own span over the instrumented client's):
:func:`merge_nested` keeps one call with what both knew. Model calls that are not part of the
agent's main line (a memory title-generation call, say) are told apart by their input: they do
not contain the run's user input, or they carry other system instructions than the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracescorer.conventions.base import (
    AgentInfo,
    LlmCall,
    TraceView,
)
from tracescorer.conventions.common import (
    SYSTEM,
    USER,
    any_content,
    has_content,
    is_genuine_user,
    last_user_block,
)
from tracescorer.conventions.reading import CALL_ORDER, ReaderCache
from tracescorer.model import Message, Span


def merge_nested(
    candidates: list[Span], trace: TraceView, cache: ReaderCache
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
        calls.sort(key=CALL_ORDER)
        return calls, sum_usage([c.usage for c in calls])
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
            below = sum_usage([usage_below.get(c) for c in children])
            usage_below[s.span_id] = below or call.usage
    tops = [s.span_id for s in candidates if parent_of[s.span_id] is None]
    out = list(merged.values())
    out.sort(key=CALL_ORDER)
    return out, sum_usage([usage_below.get(t) for t in tops])


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


def system_key(call: LlmCall) -> str:
    for m in call.system + call.input:
        if m.role == SYSTEM:
            return m.content.strip()
    return ""


def user_keys(messages: Sequence[Message]) -> set[str]:
    """The texts of the genuine user turns that carry content (an uncaptured turn matches any)."""
    out = set()
    for m in messages:
        if m.role == USER and (m.content or (is_genuine_user(m) and has_content(m))):
            out.add(m.content.strip())
    return out


def main_line(calls: list[LlmCall], info: AgentInfo) -> list[LlmCall]:
    """The calls that make up the agent's own exchange, without helper calls.

    Calls of the main line share user turns: each step re-sends the conversation. Calls are
    clustered by shared genuine user messages; the cluster holding the agent's new input wins
    (else the one with the agent's instructions, its output, most calls). Inside it, a call
    with other system instructions than the agent's is a helper too.
    """
    with_input = [c for c in calls if c.input]
    if len(with_input) <= 1:
        return calls
    if not any_content(*[c.input for c in with_input]):
        return calls  # content capture off: nothing tells a helper call apart
    users = [user_keys(c.input) for c in with_input]
    agent_system = {m.content.strip() for m in info.system if m.content} if info.system else set()
    if all(users) and set.intersection(*users):
        # One conversation: every call re-sends a same user turn; only other instructions tell
        # a helper apart.
        if not agent_system:
            return calls
        best = with_input
    else:
        best = _best_cluster(with_input, users, info, agent_system)
    if agent_system:
        same = [c for c in best if not system_key(c) or system_key(c) in agent_system]
        best = same or best
    if len(best) == len(with_input):
        return calls
    keep = {id(c) for c in best}
    return [c for c in calls if not c.input or id(c) in keep]


def _best_cluster(
    with_input: list[LlmCall], users: list[set[str]], info: AgentInfo, agent_system: set[str]
) -> list[LlmCall]:
    """The calls of the cluster (calls sharing user turns) most likely the agent's own."""
    anchor = user_keys(info.new_input) if info.new_input else set()
    if not anchor:
        for source in (info.given, info.transcript):
            start, end = last_user_block(source)
            if start >= 0:
                anchor = {m.content.strip() for m in source[start:end] if has_content(m)}
                break
    clusters = _clusters(users)
    agent_output = {m.content.strip() for m in info.output if m.content} if info.output else set()

    def score(members: list[int]) -> tuple[bool, bool, bool, int, int]:
        member_calls = [with_input[i] for i in members]
        return (
            any(users[i] & anchor for i in members),
            bool(agent_system) and any(system_key(c) in agent_system for c in member_calls),
            bool(agent_output)
            and any(m.content.strip() in agent_output for c in member_calls for m in c.output if m.content),
            len(members),
            -min(members),
        )

    return [with_input[i] for i in max(clusters, key=score)]


def _clusters(users: list[set[str]]) -> list[list[int]]:
    """Indexes of the calls grouped by shared user messages (union-find), in order."""
    if sum(map(len, users)) == len(set().union(*users)):
        return [[i] for i in range(len(users))]  # no user message shared: each call alone
    parent = list(range(len(users)))

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
    for i in range(len(users)):
        clusters.setdefault(find(i), []).append(i)
    return list(clusters.values())


def sum_usage(usages: Sequence[dict[str, int | float] | None]) -> dict[str, int | float] | None:
    total: dict[str, int | float] = {}
    for u in usages:
        for k, v in (u or {}).items():
            total[k] = total.get(k, 0) + v
    return total or None
