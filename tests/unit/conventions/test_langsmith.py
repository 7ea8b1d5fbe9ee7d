"""LangSmith's OpenTelemetry mode: a LangGraph graph (the span whose children are its nodes) is
the run; only llm runs are model calls (graph nodes and prompts repeat the state's messages);
LangChain's serialised messages; tool outputs as ToolMessage dumps; the thread id."""

from __future__ import annotations

import json
from typing import Any

from sdk_spans import span, texts

from tracescorer.conventions import extract_runs
from tracescorer.model import Span

SCOPE = "langsmith"


def run(name: str, kind: str, parent: Span | None = None, **attrs: Any) -> Span:
    return span(name, parent, scope=SCOPE, **{"langsmith.span.kind": kind, "langsmith.trace.name": name, **attrs})


def lc(cls: str, content: str, **kwargs: Any) -> dict[str, Any]:
    return {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", cls],
        "kwargs": {"content": content, **kwargs},
    }


def test_a_langgraph_graph_with_nodes_model_calls_and_tools() -> None:
    meta = {"langsmith.metadata.thread_id": "t-1"}
    graph = run(
        "weather_bot", "chain", **meta, gen_ai__prompt=json.dumps({"messages": [{"role": "user", "content": "Rome?"}]})
    )
    node = run("agent", "chain", graph, **meta, **{"langsmith.metadata.langgraph_node": "agent"})
    # the node repeats the state's messages: never a model call
    node_attrs = {
        "gen_ai.prompt": json.dumps({"messages": [{"type": "human", "content": "Rome?"}]}),
        "gen_ai.completion": '{"output": "__end__"}',
    }
    router = run(
        "should_continue",
        "chain",
        node,
        **{"langsmith.metadata.langgraph_node": "agent"},
        **{k.replace(".", "__"): v for k, v in node_attrs.items()},
    )
    call = {"name": "get_weather", "args": {"city": "Rome"}, "id": "c1", "type": "tool_call"}
    llm = run(
        "ChatOpenAI",
        "llm",
        node,
        gen_ai__prompt=json.dumps({"messages": [[lc("SystemMessage", "Brief."), lc("HumanMessage", "Rome?")]]}),
        gen_ai__completion=json.dumps(
            {"generations": [[{"text": "", "message": lc("AIMessage", "", tool_calls=[call])}]]}
        ),
        gen_ai__request__model="gpt-4o-mini",
    )
    tools = run("tools", "chain", graph, **{"langsmith.metadata.langgraph_node": "tools"})
    tool = run(
        "get_weather",
        "tool",
        tools,
        gen_ai__tool__call__id="c1",
        gen_ai__prompt='{"city": "Rome"}',
        gen_ai__completion=json.dumps(
            {"output": {"content": "warm", "type": "tool", "tool_call_id": "c1", "status": "success"}}
        ),
    )
    node2 = run("agent", "chain", graph, **{"langsmith.metadata.langgraph_node": "agent"})
    llm2 = run(
        "ChatOpenAI",
        "llm",
        node2,
        gen_ai__prompt=json.dumps(
            {
                "messages": [
                    [
                        lc("HumanMessage", "Rome?"),
                        lc("AIMessage", "", tool_calls=[call]),
                        lc("ToolMessage", "warm", tool_call_id="c1"),
                    ]
                ]
            }
        ),
        gen_ai__completion=json.dumps({"generations": [[{"text": "Warm.", "message": lc("AIMessage", "Warm.")}]]}),
    )
    [r] = extract_runs([graph, node, router, llm, tools, tool, node2, llm2]).runs
    assert (r.agent_name, r.convention, r.conversation_id) == ("weather_bot", "langsmith", "t-1")
    assert texts(r.input_messages) == [("user", "Rome?")]
    assert [m.content for m in r.system_messages] == ["Brief."]
    assert r.output[-1].content == "Warm."
    assert "__end__" not in [m.content for m in r.output]
    [tc] = r.tool_calls
    assert (tc.id, tc.name, tc.arguments, tc.result) == ("c1", "get_weather", {"city": "Rome"}, "warm")
    assert r.attributes["tracescorer.llm_calls"] == 2


def test_a_traceable_function_over_wrap_openai_is_the_run() -> None:
    top = run("support", "chain", gen_ai__prompt='{"question": "Why?"}', gen_ai__completion='{"output": "Because."}')
    llm = run(
        "ChatOpenAI",
        "llm",
        top,
        gen_ai__prompt=json.dumps({"messages": [{"role": "user", "content": "Why?"}], "model": "gpt-4o-mini"}),
        gen_ai__completion=json.dumps({"choices": [{"message": {"role": "assistant", "content": "Because."}}]}),
        langsmith__metadata__session_id="s-9",
    )
    [r] = extract_runs([top, llm]).runs
    assert (r.agent_name, texts(r.input_messages), r.output[-1].content, r.conversation_id) == (
        "support",
        [("user", "Why?")],
        "Because.",
        "s-9",
    )


def test_the_langsmith_project_is_no_conversation() -> None:
    top = run("support", "chain", langsmith__trace__session_id="project-uuid", gen_ai__prompt='"Why?"')
    llm = run("llm", "llm", top, gen_ai__prompt='{"messages": [{"role": "user", "content": "Why?"}]}')
    [r] = extract_runs([top, llm]).runs
    assert r.conversation_id is None
