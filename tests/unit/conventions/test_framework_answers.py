"""Framework patterns built to each instrumentation's source: a final answer given as a tool call
(BeeAI's RequirementAgent and smolagents through OpenInference), zero-length helper AGENT spans
(BeeAI's event spans), an agent name carried only in the span name (CrewAI)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from sdk_spans import span, texts

from tracescorer.conventions import extract_runs
from tracescorer.conventions.answers import answer_text, with_answers
from tracescorer.conventions.common import text_message
from tracescorer.conventions.crewai import agent_name
from tracescorer.conventions.smolagents import with_replayed_answers
from tracescorer.model import Message, Part, Span

BEEAI = "openinference.instrumentation.beeai"
CREWAI = "openinference.instrumentation.crewai"
SMOL = "openinference.instrumentation.smolagents"


def oi(name: str, kind: str, parent: Span | None = None, *, scope: str, **attrs: Any) -> Span:
    return span(name, parent, scope=scope, **{"openinference.span.kind": kind, **attrs})


def flat(prefix: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Messages flattened as OpenInference writes them (``<prefix>.{i}.message.*``)."""
    out: dict[str, Any] = {}
    for i, m in enumerate(messages):
        base = f"{prefix}.{i}.message"
        out[f"{base}.role"] = m["role"]
        if "text" in m:
            out[f"{base}.contents.0.message_content.type"] = "text"
            out[f"{base}.contents.0.message_content.text"] = m["text"]
        if "tool_call_id" in m:
            out[f"{base}.tool_call_id"] = m["tool_call_id"]
        for k, (cid, name, args) in enumerate(m.get("calls", ())):
            out[f"{base}.tool_calls.{k}.tool_call.id"] = cid
            out[f"{base}.tool_calls.{k}.tool_call.function.name"] = name
            out[f"{base}.tool_calls.{k}.tool_call.function.arguments"] = json.dumps(args)
    return out


# --- BeeAI RequirementAgent -------------------------------------------------------------------


def beeai_turn(question: str, answer: str, history: list[dict[str, Any]], n: int) -> list[Span]:
    """One ``RequirementAgent.run`` as openinference-instrumentation-beeai 0.1.x records it: the
    AGENT span (``agent.name``, the answer text as ``output.value``), ``ChatModel`` LLM spans whose
    last turn calls ``final_answer``, the ``final_answer`` TOOL span, and a zero-length AGENT child
    span per other agent event (here ``final_answer``)."""
    agent = oi(
        "weather_agent",
        "AGENT",
        scope=BEEAI,
        **{
            "agent.name": "weather_agent",
            "input.value": json.dumps({"prompt": question, "expected_output": None}),
            "input.mime_type": "application/json",
            "output.value": answer,
            "output.mime_type": "text/plain",
            "session.id": "bee-1",
        },
    )
    given = [{"role": "system", "text": "You are a weather agent."}, *history, {"role": "user", "text": question}]
    call = (f"call_{n}", "final_answer", {"response": answer})
    llm = oi(
        "ChatModel",
        "LLM",
        agent,
        scope=BEEAI,
        **flat("llm.input_messages", given),
        **flat("llm.output_messages", [{"role": "assistant", "calls": [call]}]),
        **{"llm.model_name": "gpt-4o-mini", "output.value": "", "output.mime_type": "text/plain"},
    )
    tool = oi(
        "final_answer",
        "TOOL",
        agent,
        scope=BEEAI,
        **{
            "tool.name": "final_answer",
            "input.value": json.dumps({"response": answer}),
            "output.value": "Message has been sent",
        },
    )
    event = oi(
        "final_answer",
        "AGENT",
        agent,
        scope=BEEAI,
        **{"input.value": json.dumps({"state": {"answer": None}}), "input.mime_type": "application/json"},
    )
    event = dataclasses.replace(event, end_time_unix_nano=event.start_time_unix_nano)
    return [agent, llm, tool, event]


def test_beeai_final_answer_is_the_output_and_in_the_next_runs_history() -> None:
    first = beeai_turn("Weather in Paris?", "Sunny in Paris", [], 1)
    replay = [
        {"role": "user", "text": "Weather in Paris?"},
        {"role": "assistant", "calls": [("call_1", "final_answer", {"response": "Sunny in Paris"})]},
        {"role": "tool", "tool_call_id": "call_1", "text": "Message has been sent"},
    ]
    second = beeai_turn("And Rome?", "Warm in Rome", replay, 2)
    runs = extract_runs(first + second).runs
    assert [(r.agent_name, r.conversation_id) for r in runs] == [("weather_agent", "bee-1")] * 2
    one, two = runs
    assert texts(one.input_messages) == [("user", "Weather in Paris?")]
    assert [m.content for m in one.output if m.content] == ["Sunny in Paris"]
    assert [(t.name, t.arguments, t.result) for t in one.tool_calls] == [
        ("final_answer", {"response": "Sunny in Paris"}, "Message has been sent")
    ]
    assert [(m.role, m.content) for m in two.remembered_messages if m.content] == [
        ("user", "Weather in Paris?"),
        ("assistant", "Sunny in Paris"),
    ]
    assert [m.content for m in two.output if m.content] == ["Warm in Rome"]


def test_without_a_stated_output_the_answer_is_the_calls_argument() -> None:
    agent, llm, _tool, event = beeai_turn("Weather in Paris?", "Sunny in Paris", [], 1)
    agent = dataclasses.replace(
        agent, attributes={k: v for k, v in agent.attributes.items() if not k.startswith("output.")}
    )
    [run] = extract_runs([agent, llm, event]).runs  # no tool span either: the model's call says it
    assert run.output[-1].content == "Sunny in Paris"


def test_a_zero_length_agent_span_with_a_conversation_is_still_a_run() -> None:
    agent = oi("helper", "AGENT", scope=BEEAI, **{"agent.name": "helper", "input.value": "Hi", "output.value": "Hello"})
    [run] = extract_runs([dataclasses.replace(agent, end_time_unix_nano=agent.start_time_unix_nano)]).runs
    assert (texts(run.input_messages), run.output[-1].content) == ([("user", "Hi")], "Hello")


@pytest.mark.parametrize(
    ("arguments", "answer"),
    [
        ({"answer": "42"}, "42"),  # smolagents
        ('{"response": "Sunny"}', "Sunny"),  # BeeAI, as JSON text
        ({"answer": {"temp": 22}}, '{"temp": 22}'),
        ({"city": "Paris", "temp": 22}, '{"city": "Paris", "temp": 22}'),  # a structured answer
        ({}, None),
    ],
)
def test_answer_text(arguments: Any, answer: str | None) -> None:
    assert answer_text(arguments) == answer


def test_with_answers_puts_the_answer_after_the_calls_tool_result() -> None:
    call = Message(
        role="assistant", parts=(Part(type="tool_call", id="c", name="final_answer", arguments={"answer": "A"}),)
    )
    result = Message(role="tool", parts=(Part(type="tool_call_response", id="c", response="sent"),))
    question = text_message("user", "Q2")
    got = with_answers([text_message("user", "Q1"), call, result, question])
    assert [(m.role, m.content) for m in got] == [
        ("user", "Q1"),
        ("assistant", ""),
        ("tool", ""),
        ("assistant", "A"),
        ("user", "Q2"),
    ]


# --- smolagents' replayed final steps ---------------------------------------------------------


def test_smolagents_replayed_final_answers_read_as_the_assistant_turn() -> None:
    calling = "Calling tools:\n[{'id': 'c2', 'type': 'function', 'function': {'name': 'final_answer', 'arguments': {'answer': 'Sunny'}}}]"
    code = "Calling tools:\n[{'id': 'c3', 'type': 'function', 'function': {'name': 'python_interpreter', 'arguments': 'final_answer(result)'}}]"
    given = [
        text_message("user", "New task:\nParis?"),
        text_message("tool-call", calling),
        text_message("tool-response", "Observation:\nSunny"),
        text_message("user", "New task:\nRome?"),
        text_message("tool-call", code),
        text_message("tool-response", "Observation:\nExecution logs:\nLast output from code snippet:\nWarm"),
        text_message("user", "New task:\nBerlin?"),
    ]
    got = [(m.role, m.content) for m in with_replayed_answers(given) if m.role in ("user", "assistant")]
    assert got == [
        ("user", "New task:\nParis?"),
        ("assistant", "Sunny"),
        ("user", "New task:\nRome?"),
        ("assistant", "Warm"),
        ("user", "New task:\nBerlin?"),
    ]


# --- CrewAI -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "attrs", "want"),
    [
        ("Weather Researcher._execute_core", {}, "Weather Researcher"),
        ("Weather Researcher.forecast._execute_core", {"task_name": "forecast"}, "Weather Researcher"),
        ("Sr. Analyst._execute_core", {}, "Sr. Analyst"),
        ("x._execute_core", {"graph.node.id": "Weather Researcher"}, "Weather Researcher"),
        ("Weather Researcher.kickoff", {}, "Weather Researcher"),
        ("Task._execute_core", {}, None),
        ("Agent.kickoff", {}, None),
    ],
)
def test_crewai_agent_names(name: str, attrs: dict[str, Any], want: str | None) -> None:
    assert agent_name(span(name, scope=CREWAI, **attrs)) == want


def test_a_crew_gives_one_run_per_task_named_after_its_agents_role() -> None:
    crew = oi("Weather Crew.kickoff", "CHAIN", scope=CREWAI, **{"input.value": "{}"})
    spans = [crew]
    for role, question, answer in (("Weather Researcher", "Find the weather", "Sunny"), ("Writer", "Write it", "Done")):
        task = oi(
            f"{role}._execute_core",
            "AGENT",
            crew,
            scope=CREWAI,
            **{
                "input.value": json.dumps({"context": ""}),
                "input.mime_type": "application/json",
                "output.value": answer,
            },
        )
        llm = oi(
            "litellm.completion",
            "LLM",
            task,
            scope="openinference.instrumentation.litellm",
            **flat(
                "llm.input_messages",
                [{"role": "system", "text": f"You are {role}."}, {"role": "user", "text": question}],
            ),
            **flat("llm.output_messages", [{"role": "assistant", "text": answer}]),
        )
        spans += [task, llm]
    runs = extract_runs(spans).runs
    assert [(r.agent_name, r.convention, texts(r.input_messages), r.output[-1].content) for r in runs] == [
        ("Weather Researcher", "openinference", [("user", "Find the weather")], "Sunny"),
        ("Writer", "openinference", [("user", "Write it")], "Done"),
    ]
