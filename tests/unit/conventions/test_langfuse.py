"""Langfuse SDK (v3 and later) spans: agent, generation and tool observations, the top
``@observe`` span of a run without an agent observation, session and user ids, level ERROR."""

from __future__ import annotations

import json
from typing import Any

from sdk_spans import span, texts

from tracescorer.conventions import extract_runs
from tracescorer.model import Span

SCOPE = "langfuse-sdk"


def observation(name: str, kind: str, parent: Span | None = None, **attrs: Any) -> Span:
    return span(name, parent, scope=SCOPE, **{"langfuse.observation.type": kind, **attrs})


def test_agent_generation_and_tool_observations_make_a_run() -> None:
    agent = observation(
        "support_agent",
        "agent",
        **{
            "langfuse.observation.input": json.dumps({"args": [[], "Weather in Rome?"], "kwargs": {}}),
            "langfuse.observation.output": "Rome: warm",
            "session.id": "sess-1",
            "user.id": "u-1",
        },
    )
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}
    first = observation(
        "OpenAI-generation",
        "generation",
        agent,
        **{
            "langfuse.observation.input": json.dumps(
                {
                    "tools": [],
                    "messages": [
                        {"role": "system", "content": "Brief."},
                        {"role": "user", "content": "Weather in Rome?"},
                    ],
                }
            ),
            "langfuse.observation.output": json.dumps({"role": "assistant", "content": None, "tool_calls": [call]}),
            "langfuse.observation.model.name": "gpt-4o-mini",
            "langfuse.observation.usage_details": json.dumps({"prompt_tokens": 10, "completion_tokens": 2}),
        },
    )
    tool = observation(
        "get_weather",
        "tool",
        agent,
        **{
            "langfuse.observation.input": '{"args": [], "kwargs": {"city": "Rome"}}',
            "langfuse.observation.output": "warm",
        },
    )
    second = observation(
        "OpenAI-generation",
        "generation",
        agent,
        **{
            "langfuse.observation.input": json.dumps([{"role": "user", "content": "Weather in Rome?"}]),
            "langfuse.observation.output": "Rome: warm",
            "langfuse.observation.usage_details": json.dumps({"input": 20, "output": 3, "total": 23}),
        },
    )
    [run] = extract_runs([agent, first, tool, second]).runs
    assert (run.agent_name, run.convention, run.conversation_id, run.resource_id) == (
        "support_agent",
        "langfuse",
        "sess-1",
        "u-1",
    )
    assert texts(run.input_messages) == [("user", "Weather in Rome?")]
    assert [m.content for m in run.system_messages] == ["Brief."]
    assert run.output[-1].content == "Rome: warm"
    [tc] = run.tool_calls
    assert (tc.id, tc.name, tc.arguments, tc.result) == ("c1", "get_weather", {"city": "Rome"}, "warm")
    assert run.model == "gpt-4o-mini"
    assert run.usage == {"input_tokens": 30, "output_tokens": 5, "total_tokens": 23}


def test_without_an_agent_observation_the_top_observe_span_is_the_run() -> None:
    top = observation("answer_question", "span", **{"langfuse.observation.input": '{"args": ["Why?"], "kwargs": {}}'})
    gen = observation(
        "llm",
        "generation",
        top,
        **{
            "langfuse.observation.input": '[{"role": "user", "content": "Why?"}]',
            "langfuse.observation.output": "Because.",
        },
    )
    [run] = extract_runs([top, gen]).runs
    assert run.agent_name == "answer_question"
    assert texts(run.input_messages) == [("user", "Why?")]
    assert run.output[-1].content == "Because."


def test_a_tool_observation_at_level_error_is_a_failed_call() -> None:
    agent = observation("a", "agent", **{"langfuse.observation.input": '"Go"'})
    tool = observation(
        "lookup",
        "tool",
        agent,
        **{"langfuse.observation.level": "ERROR", "langfuse.observation.status_message": "timeout"},
    )
    [run] = extract_runs([agent, tool]).runs
    [tc] = run.tool_calls
    assert (tc.name, tc.error) == ("lookup", "timeout")


def test_the_langchain_handlers_agent_node_is_a_step_of_its_graph() -> None:
    graph = observation("weather_graph", "chain", **{"langfuse.observation.input": '{"messages": []}'})
    node = observation("agent", "agent", graph, **{"langfuse.observation.metadata.langgraph_node": '"agent"'})
    tool_def = {"role": "tool", "content": {"type": "function", "function": {"name": "get_weather"}}}
    gen = observation(
        "ChatOpenAI",
        "generation",
        node,
        **{
            "langfuse.observation.input": json.dumps([{"role": "user", "content": "Rome?"}, tool_def]),
            "langfuse.observation.output": json.dumps({"role": "assistant", "content": "Warm."}),
        },
    )
    [run] = extract_runs([graph, node, gen]).runs
    assert (run.agent_name, texts(run.input_messages), run.output[-1].content) == (
        "weather_graph",
        [("user", "Rome?")],
        "Warm.",
    )
