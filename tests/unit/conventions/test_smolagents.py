"""smolagents through openinference-instrumentation-smolagents: the agent is named after the
agent, not the instrumented method; the answer of a tool-calling or code agent is its
final_answer call's argument, after the model's turns."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sdk_spans import span, texts

from tracescorer.conventions import extract_runs
from tracescorer.conventions.smolagents import agent_name
from tracescorer.model import Span

SCOPE = "openinference.instrumentation.smolagents"


def oi(name: str, kind: str, parent: Span | None = None, **attrs: Any) -> Span:
    return span(name, parent, scope=SCOPE, **{"openinference.span.kind": kind, **attrs})


@pytest.mark.parametrize(
    ("span_name", "name"),
    [("weather_scout.run", "weather_scout"), ("CodeAgent.run", None), ("ToolCallingAgent.run", None), ("x", "x")],
)
def test_agent_names(span_name: str, name: str | None) -> None:
    assert agent_name(span_name) == name


def llm(parent: Span, user: str, out: dict[str, Any]) -> Span:
    attrs = {
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "You are an expert assistant.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": user,
        "llm.output_messages.0.message.role": "assistant",
    }
    for key, value in out.items():
        attrs[f"llm.output_messages.0.message.tool_calls.0.tool_call.{key}"] = value
    return oi("OpenAIModel.generate", "LLM", parent, **attrs)


def test_a_tool_calling_agent_answers_with_the_final_answer_argument() -> None:
    agent = oi(
        "weather_scout.run",
        "AGENT",
        **{
            "input.value": json.dumps({"task": "Rome?", "reset": True}),
            "output.value": "Warm in Rome",
            "session.id": "s",
        },
    )
    step = oi("Step 1", "CHAIN", agent)
    call = llm(
        step,
        "New task:\nRome?",
        {"id": "c1", "function.name": "final_answer", "function.arguments": '{"answer": "Warm in Rome"}'},
    )
    final = oi(
        "FinalAnswerTool",
        "TOOL",
        step,
        **{
            "tool.name": "final_answer",
            "input.value": json.dumps(
                {"args": [], "sanitize_inputs_outputs": True, "kwargs": {"answer": "Warm in Rome"}}
            ),
            "output.value": "Warm in Rome",
        },
    )
    [run] = extract_runs([agent, step, call, final]).runs
    assert (run.agent_name, run.convention, run.conversation_id) == ("weather_scout", "openinference", "s")
    assert texts(run.input_messages) == [("user", "New task:\nRome?")]
    assert run.output[-1].content == "Warm in Rome"
    assert [(t.name, t.arguments) for t in run.tool_calls] == [("final_answer", {"answer": "Warm in Rome"})]


def test_a_code_agent_answer_follows_its_code_turn() -> None:
    agent = oi("coder.run", "AGENT", **{"input.value": '{"task": "Sum?"}', "output.value": "3"})
    step = oi("Step 1", "CHAIN", agent)
    call = oi(
        "OpenAIModel.generate",
        "LLM",
        step,
        **{
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "New task:\nSum?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "Thought: add.\n<code>\nfinal_answer(1 + 2)\n</code>",
        },
    )
    tool = oi(
        "SimpleTool",
        "TOOL",
        step,
        **{
            "tool.name": "add",
            "input.value": '{"args": [], "sanitize_inputs_outputs": true, "kwargs": {"a": 1, "b": 2}}',
        },
    )
    final = oi(
        "FinalAnswerTool", "TOOL", step, **{"tool.name": "final_answer", "input.value": '{"args": [3], "kwargs": {}}'}
    )
    [run] = extract_runs([agent, step, call, tool, final]).runs
    assert run.agent_name == "coder"
    assert [m.content for m in run.output][-2:] == ["Thought: add.\n<code>\nfinal_answer(1 + 2)\n</code>", "3"]
    # tools called from the code: their call records' arguments
    assert [(t.name, t.arguments) for t in run.tool_calls] == [("add", {"a": 1, "b": 2}), ("final_answer", 3)]
