"""Which spans are runs: the nested-agent rules, one place for every convention.

A run is one agent invocation. Readers mark agent spans (and say when a span only *wraps* an
invocation or is a *graph node*); these rules then decide:

- **graph nodes** are not agents: a node (LangGraph's ``agent`` node, marked AGENT by
  OpenInference) belongs to its graph — the node's parent span. That graph span is the run (read
  by the convention's ``root_agent`` reader when no reader marked it an agent);
- **same-name wrappers** are one invocation: an agent span inside an agent span of the same name
  (Traceloop's root ``invoke_agent X`` and ``X.workflow``; a framework's inner step marked
  AGENT) is merged into the outer one;
- **nameless wrappers**: a wrapper (workflow span, agent span with no name of its own) around
  exactly one agent, with no model call of its own, is merged into that agent; around several,
  it is no run (each agent below is one); around none, it is the run;
- **agents invoked by agents** (as a tool, a handoff, ADK ``AgentTool``, agent-as-tool) keep
  their own run, name and conversation id, linked to the enclosing run by ``parent_span_id``.

Without any agent span, a run is each outermost span whose subtree holds model calls; model
calls under a tool execution belong to what the tool ran — a nested agent — so the outermost
span below each tool counts as the top of its own run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tracescorer.conventions.base import AgentInfo, AgentReader, TraceView
from tracescorer.model import Span

SpanTest = Callable[[Span], bool]


def merge(primary: AgentInfo, other: AgentInfo) -> AgentInfo:
    """``primary`` with the gaps filled from ``other`` (the same invocation seen twice)."""
    for name in ("name", "id", "conversation_id", "resource_id", "model", "usage"):
        if getattr(primary, name) is None:
            setattr(primary, name, getattr(other, name))
    for name in ("system", "new_input", "given", "transcript", "output", "answer"):
        if not getattr(primary, name):
            setattr(primary, name, list(getattr(other, name)))
    primary.attributes = {**other.attributes, **primary.attributes}
    return primary


def _promote(span: Span, trace: TraceView, readers: Sequence[AgentReader], *, named: bool) -> AgentInfo:
    """``span`` read as a run's agent; without a reader for it, named after itself if ``named``."""
    for read in readers:
        info = read(span, trace)
        if isinstance(info, AgentInfo):
            return info
    return AgentInfo(span=span, name=(span.name or None) if named else None)


def resolve(
    trace: TraceView,
    found: dict[str, AgentInfo],
    *,
    is_model_call: SpanTest,
    root_readers: Sequence[AgentReader],
) -> dict[str, AgentInfo]:
    """The runs among the agent spans readers ``found`` (span id -> info), rules applied."""
    agents = dict(found)
    # Graph nodes first: their graph is the run.
    for sid, info in list(agents.items()):
        if not info.graph_node:
            continue
        del agents[sid]
        graph = trace.parent(info.span)
        if graph is None:
            info.graph_node = False
            agents[sid] = info  # a node without its graph: the best we have
            continue
        host = agents.get(graph.span_id)
        if host is None:
            host = _promote(graph, trace, root_readers, named=True)
            agents[graph.span_id] = host
        merge(host, info)
    if len(agents) <= 1:
        return agents

    by_depth = sorted(agents.values(), key=lambda i: trace.depth.get(i.span.span_id, 0))
    for info in by_depth:
        sid = info.span.span_id
        if sid not in agents:
            continue
        outer_id = trace.nearest(info.span, agents)
        if outer_id is None:
            continue
        outer = agents[outer_id]
        if info.name is not None and info.name == outer.name:
            del agents[sid]
            merge(outer, info)
        elif outer.wrapper and _only_agent_below(outer, agents, trace, is_model_call):
            del agents[outer_id]
            merge(info, outer)
            info.wrapper = False
    # Wrappers around several agents (and no model call of their own) are no run.
    for sid, info in list(agents.items()):
        if (
            info.wrapper
            and any(trace.nearest(a.span, agents) == sid for a in agents.values())
            and not any(is_model_call(s) for s in _own(info.span, agents, trace))
        ):
            del agents[sid]
    return agents


def _own(span: Span, agents: dict[str, AgentInfo], trace: TraceView) -> list[Span]:
    return trace.descendants(span, stop=lambda s: s.span_id in agents)


def _only_agent_below(
    wrapper: AgentInfo, agents: dict[str, AgentInfo], trace: TraceView, is_model_call: SpanTest
) -> bool:
    wid = wrapper.span.span_id
    below = [a for a in agents.values() if a.span.span_id != wid and trace.nearest(a.span, agents) == wid]
    if len(below) != 1:
        return False
    return not any(is_model_call(s) for s in _own(wrapper.span, agents, trace))


def fallback_roots(
    trace: TraceView, *, is_model_call: SpanTest, is_tool: SpanTest, root_readers: Sequence[AgentReader]
) -> dict[str, AgentInfo]:
    """No agent span: one run per outermost span holding model calls, tools bounding runs."""
    roots: dict[str, AgentInfo] = {}
    for span in trace.spans:
        if not is_model_call(span):
            continue
        top = span
        for anc in trace.ancestors(span):
            if is_tool(anc):
                break
            top = anc
        if top.span_id not in roots:
            roots[top.span_id] = _promote(top, trace, root_readers, named=False)
    return roots
