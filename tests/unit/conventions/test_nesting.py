"""The nested-agent rules (conventions/nesting.py), each from the span shapes real frameworks sent
(trimmed copies of spans in tests/data/captures): wrappers of one invocation are one run, graph
nodes are not agents, agents invoked by agents are runs of their own."""

from __future__ import annotations

import json
from itertools import count
from typing import Any

from tracescorer.conventions import extract_runs
from tracescorer.model import AgentRun, Scope, Span

TRACE = "acadb46e95fc89da406ed350968ab4a4"
_ids = count(1)
_clock = count(1)


def span(name: str, parent: Span | None = None, scope: str = "", **attrs: Any) -> Span:
    start = next(_clock) * 1_000_000
    return Span(
        trace_id=TRACE,
        span_id=f"{next(_ids):016x}",
        parent_span_id=parent.span_id if parent else None,
        name=name,
        kind="internal",
        start_time_unix_nano=start,
        end_time_unix_nano=start + 10_000_000_000,
        attributes=attrs,
        scope=Scope(name=scope),
    )


def oi_llm(parent: Span, user: str, answer: str, system: str = "You are a concise travel assistant.") -> Span:
    return span(
        "generation",
        parent,
        **{
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": system,
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": user,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": answer,
        },
    )


def genai_chat(parent: Span, user: str, answer: str, scope: str = "") -> Span:
    return span(
        "ChatOpenAI.chat",
        parent,
        scope,
        **{
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": user}]}]),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
            ),
        },
    )


def runs(*spans: Span) -> list[AgentRun]:
    extraction = extract_runs(list(spans))
    assert extraction.unmatched_reason is None, extraction.unmatched_reason
    # Delivery order never matters.
    again = extract_runs(list(reversed(spans)))
    assert [r.to_dict() for r in again.runs] == [r.to_dict() for r in extraction.runs]
    return extraction.runs


# --- wrappers of one invocation are one run ----------------------------------------------------


def test_nameless_workflow_span_around_one_agent_is_merged_into_it() -> None:
    # openinference-instrumentation-openai-agents: the SDK trace is an AGENT span without agent.name.
    root = span("travel", **{"openinference.span.kind": "AGENT"})
    workflow = span("Agent workflow", root, **{"openinference.span.kind": "CHAIN"})
    agent = span(
        "travel_assistant",
        workflow,
        **{"openinference.span.kind": "AGENT", "agent.name": "travel_assistant", "session.id": "s-1"},
    )
    turn = span("turn", agent, **{"openinference.span.kind": "CHAIN"})
    llm = oi_llm(turn, "What is the weather in Paris?", "Sunny.")
    (run,) = runs(root, workflow, agent, turn, llm)
    assert run.agent_name == "travel_assistant"
    assert run.span_id == agent.span_id
    assert run.conversation_id == "s-1"
    assert [m.content for m in run.input_messages] == ["What is the weather in Paris?"]


def test_same_name_agent_spans_are_one_invocation() -> None:
    # Traceloop's LangChain instrumentation: the root invoke_agent X and X.workflow.
    scope = "opentelemetry.instrumentation.langchain"
    root = span(
        "invoke_agent travel_assistant",
        None,
        scope,
        **{
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "travel_assistant",
            "gen_ai.conversation.id": "thread-lg-1",
        },
    )
    workflow = span(
        "travel_assistant.workflow",
        root,
        scope,
        **{
            "traceloop.span.kind": "workflow",
            "traceloop.entity.name": "travel_assistant",
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "travel_assistant",
        },
    )
    task = span(
        "execute_task agent",
        workflow,
        scope,
        **{"traceloop.span.kind": "task", "gen_ai.operation.name": "execute_task"},
    )
    chat = genai_chat(task, "What is the weather in Paris?", "Sunny.", scope)
    (run,) = runs(root, workflow, task, chat)
    assert (run.agent_name, run.span_id, run.conversation_id) == ("travel_assistant", root.span_id, "thread-lg-1")
    assert run.convention == "openllmetry"
    assert run.attributes["tracescorer.llm_calls"] == 1


def test_wrapper_around_several_agents_is_no_run_of_its_own() -> None:
    # A nameless workflow span with two agents in it (a handoff): two runs, no third.
    root = span("Agent workflow", **{"openinference.span.kind": "AGENT"})
    triage = span("triage", root, **{"openinference.span.kind": "AGENT", "agent.name": "triage"})
    billing = span("billing", root, **{"openinference.span.kind": "AGENT", "agent.name": "billing"})
    spans = [
        root,
        triage,
        oi_llm(triage, "I need a refund", "Handing over."),
        billing,
        oi_llm(billing, "I need a refund", "Refund issued."),
    ]
    got = runs(*spans)
    assert [r.agent_name for r in got] == ["triage", "billing"]
    assert all(r.parent_span_id == root.span_id for r in got)


def test_a_wrapper_with_model_calls_of_its_own_is_an_agent() -> None:
    # An orchestrator decorated without agent.name that calls the model itself, then a sub-agent.
    orchestrator = span("orchestrator", **{"openinference.span.kind": "AGENT", "session.id": "s-9"})
    own = oi_llm(orchestrator, "Plan my trip", "Asking the researcher.", system="You plan trips.")
    tool = span("researcher", orchestrator, **{"openinference.span.kind": "TOOL", "tool.name": "researcher"})
    sub = span("researcher", tool, **{"openinference.span.kind": "AGENT", "agent.name": "researcher"})
    sub_llm = oi_llm(sub, "Find flights", "Found two.", system="You research.")
    outer, inner = runs(orchestrator, own, tool, sub, sub_llm)
    assert (outer.agent_name, inner.agent_name) == ("orchestrator", "researcher")
    assert inner.parent_span_id == outer.span_id


# --- graph nodes are not agents ---------------------------------------------------------------


def test_langgraph_agent_node_is_part_of_its_graph() -> None:
    # openinference-instrumentation-langchain marks LangGraph's "agent" node AGENT; the graph
    # (create_react_agent(name="travel_assistant")) is the root CHAIN.
    def meta(node: str, step: int) -> str:
        return json.dumps({"thread_id": "thread-lg-1", "langgraph_step": step, "langgraph_node": node})

    graph = span(
        "travel_assistant",
        **{
            "openinference.span.kind": "CHAIN",
            "session.id": "thread-lg-1",
            "input.value": json.dumps({"messages": [{"role": "user", "content": "Hi"}]}),
        },
    )
    node1 = span("agent", graph, **{"openinference.span.kind": "AGENT", "metadata": meta("agent", 1)})
    llm1 = oi_llm(node1, "What is the weather in Paris?", "")
    tools = span("tools", graph, **{"openinference.span.kind": "CHAIN", "metadata": meta("tools", 2)})
    node2 = span("agent", graph, **{"openinference.span.kind": "AGENT", "metadata": meta("agent", 3)})
    llm2 = oi_llm(node2, "What is the weather in Paris?", "Sunny.")
    (run,) = runs(graph, node1, llm1, tools, node2, llm2)
    assert (run.agent_name, run.span_id, run.conversation_id) == ("travel_assistant", graph.span_id, "thread-lg-1")
    assert run.attributes["tracescorer.llm_calls"] == 2
    assert run.output[-1].content == "Sunny."


def test_graph_node_inside_a_declared_agent_is_merged_into_it() -> None:
    agent = span("support", **{"openinference.span.kind": "AGENT", "agent.name": "support"})
    node = span(
        "agent", agent, **{"openinference.span.kind": "AGENT", "metadata": json.dumps({"langgraph_node": "agent"})}
    )
    (run,) = runs(agent, node, oi_llm(node, "Where is my parcel?", "On its way."))
    assert (run.agent_name, run.span_id) == ("support", agent.span_id)


# --- agents invoked by agents are runs of their own -------------------------------------------


def test_agent_tool_sub_agent_keeps_its_name_conversation_and_parent() -> None:
    # Google ADK: AgentTool runs the sub-agent in a session of its own under execute_tool.
    scope = "gcp.vertex.agent"
    invocation = span("invocation", None, scope)
    outer = span(
        "invoke_agent travel_assistant",
        invocation,
        scope,
        **{
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "travel_assistant",
            "gen_ai.conversation.id": "sess-adk-1",
        },
    )
    call = genai_chat(outer, "Ask the local_expert about Berlin.", "", scope)
    tool = span(
        "execute_tool local_expert",
        outer,
        scope,
        **{
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "local_expert",
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.call.result": json.dumps({"result": "Cloudy"}),
        },
    )
    inner_inv = span("invocation", tool, scope)
    inner = span(
        "invoke_agent local_expert",
        inner_inv,
        scope,
        **{
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "local_expert",
            "gen_ai.conversation.id": "689f4b73",
        },
    )
    inner_call = genai_chat(inner, "Ask the local_expert about Berlin.", "Cloudy.", scope)
    outer_run, inner_run = runs(invocation, outer, call, tool, inner_inv, inner, inner_call)
    assert (outer_run.agent_name, outer_run.conversation_id) == ("travel_assistant", "sess-adk-1")
    assert (inner_run.agent_name, inner_run.conversation_id) == ("local_expert", "689f4b73")
    assert inner_run.parent_span_id == outer_run.span_id
    assert outer_run.attributes["tracescorer.llm_calls"] == 1  # the sub-agent's call is not the outer's
    assert [t.result for t in outer_run.tool_calls] == ["Cloudy"]  # ADK's {"result": ...} unwrapped


def test_without_agent_spans_a_tool_bounds_the_nested_run() -> None:
    # LangGraph.js through OpenInference: no AGENT span; the nested graph runs inside a TOOL span.
    root = span("travel_assistant", **{"openinference.span.kind": "CHAIN", "session.id": "thread-1"})
    llm = oi_llm(root, "Ask the local_expert about Berlin.", "")
    tool = span("local_expert", root, **{"openinference.span.kind": "TOOL", "tool.name": "local_expert"})
    sub = span("local_expert", tool, **{"openinference.span.kind": "CHAIN"})
    sub_llm = oi_llm(sub, "Ask the local_expert about Berlin.", "Cloudy.", system="You are a local expert.")
    outer, inner = runs(root, llm, tool, sub, sub_llm)
    assert (outer.agent_name, inner.agent_name) == ("travel_assistant", "local_expert")
    assert inner.parent_span_id == outer.span_id
    assert [m.content for m in inner.system_messages] == ["You are a local expert."]


def test_agent_span_recorded_beside_its_work_owns_that_work() -> None:
    # Traceloop's LangChain instrumentation: a graph invoked in a tool is an empty
    # invoke_agent span beside the execute_task span holding the graph's model calls.
    scope = "opentelemetry.instrumentation.langchain"
    root = span(
        "invoke_agent travel_assistant",
        None,
        scope,
        **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel_assistant"},
    )
    chat = genai_chat(root, "Ask the local_expert about Berlin.", "", scope)
    tool = span(
        "execute_tool local_expert",
        root,
        scope,
        **{"traceloop.span.kind": "tool", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "local_expert"},
    )
    empty = span(
        "invoke_agent local_expert",
        tool,
        scope,
        **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "local_expert"},
    )
    task = span(
        "execute_task local_expert",
        tool,
        scope,
        **{"traceloop.span.kind": "task", "gen_ai.operation.name": "execute_task", "gen_ai.task.name": "local_expert"},
    )
    sub_chat = genai_chat(task, "Ask the local_expert about Berlin.", "Cloudy.", scope)
    outer, inner = runs(root, chat, tool, empty, task, sub_chat)
    assert (inner.agent_name, inner.span_id, inner.parent_span_id) == ("local_expert", empty.span_id, root.span_id)
    assert inner.output[-1].content == "Cloudy."
    assert outer.attributes["tracescorer.llm_calls"] == inner.attributes["tracescorer.llm_calls"] == 1
