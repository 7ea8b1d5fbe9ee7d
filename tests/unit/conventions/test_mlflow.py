"""MLflow spans exported over OTLP: every attribute value JSON encoded (strings too), AGENT /
CHAT_MODEL / TOOL span types, a traced CHAIN function at the top of a run without an agent."""

from __future__ import annotations

import json
from typing import Any

from sdk_spans import span, texts

from tracescorer.conventions import extract_runs
from tracescorer.conventions.mlflow import span_type, value
from tracescorer.model import Span

SCOPE = "mlflow.tracing.provider"


def mlflow_span(name: str, kind: str, parent: Span | None = None, **values: Any) -> Span:
    """A span whose attribute values are JSON encoded as MLflow writes them."""
    attrs = {"mlflow__spanType": json.dumps(kind), **{k: json.dumps(v) for k, v in values.items()}}
    return span(name, parent, scope=SCOPE, **attrs)


def completion(content: str | None, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message = {"role": "assistant", "content": content, "tool_calls": tool_calls}
    return {"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "message": message}]}


def test_values_are_json_decoded_strings_included() -> None:
    s = mlflow_span("agent", "AGENT", mlflow__spanInputs={"q": "x"})
    assert span_type(s) == "AGENT"
    assert value(s, "mlflow.spanInputs") == {"q": "x"}
    assert span_type(span("raw", scope=SCOPE, mlflow__spanType="TOOL")) == "TOOL"  # set unencoded


def test_agent_chat_model_and_tool_spans_make_a_run() -> None:
    system = {"role": "system", "content": "Brief."}
    history = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    agent = mlflow_span(
        "support_agent",
        "AGENT",
        mlflow__spanInputs={"history": history, "question": "Rome?"},
        mlflow__spanOutputs="Warm.",
    )
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}
    first = mlflow_span(
        "Completions",
        "CHAT_MODEL",
        agent,
        mlflow__spanInputs={
            "model": "gpt-4o-mini",
            "messages": [system, *history, {"role": "user", "content": "Rome?"}],
        },
        mlflow__spanOutputs=completion(None, [call]),
        mlflow__llm__model="gpt-4o-mini",
        mlflow__chat__tokenUsage={"input_tokens": 9, "output_tokens": 1, "total_tokens": 10},
    )
    tool = mlflow_span("get_weather", "TOOL", agent, mlflow__spanInputs={"city": "Rome"}, mlflow__spanOutputs="warm")
    second = mlflow_span(
        "Completions",
        "CHAT_MODEL",
        agent,
        mlflow__spanInputs={"messages": [system, *history, {"role": "user", "content": "Rome?"}]},
        mlflow__spanOutputs=completion("Warm."),
    )
    [run] = extract_runs([agent, first, tool, second]).runs
    assert (run.agent_name, run.convention, run.model) == ("support_agent", "mlflow", "gpt-4o-mini")
    assert texts(run.input_messages) == [("user", "Rome?")]
    assert texts(run.remembered_messages) == [("user", "Hi"), ("assistant", "Hello")]
    assert [m.content for m in run.system_messages] == ["Brief."]
    assert run.output[-1].content == "Warm."
    [tc] = run.tool_calls
    assert (tc.id, tc.name, tc.arguments, tc.result) == ("c1", "get_weather", {"city": "Rome"}, "warm")
    assert run.usage == {"input_tokens": 9, "output_tokens": 1, "total_tokens": 10}
    assert run.conversation_id is None  # MLflow keeps sessions as trace metadata, not exported


def test_a_traced_chain_function_at_the_top_is_the_run() -> None:
    top = mlflow_span("answer", "CHAIN", mlflow__spanInputs={"question": "Why?"}, metadata={"thread_id": "t-7"})
    llm = mlflow_span(
        "Completions",
        "LLM",
        top,
        mlflow__spanInputs={"messages": [{"role": "user", "content": "Why?"}]},
        mlflow__spanOutputs=completion("Because."),
    )
    [run] = extract_runs([top, llm]).runs
    assert (run.agent_name, texts(run.input_messages), run.output[-1].content, run.conversation_id) == (
        "answer",
        [("user", "Why?")],
        "Because.",
        "t-7",  # a LangChain run's metadata (mlflow.langchain.autolog): LangGraph's thread
    )


def test_agents_sdk_spans_group_one_run() -> None:
    """agents.trace() mirrored as an AGENT span without input or output, MLflow's empty
    AgentRunner.run beside the SDK's workflow, the SDK's agent span: one run, the agent's."""
    group = mlflow_span("travel", "AGENT", mlflow__spanInputs="", mlflow__spanOutputs="")
    runner = mlflow_span("AgentRunner.run", "AGENT", group, mlflow__spanInputs=[{"role": "user", "content": "Rome?"}])
    runner.attributes["mlflow.openai.agent_run_root"] = "true"
    workflow = mlflow_span("Agent workflow", "CHAIN", group)
    agent = mlflow_span("assistant", "AGENT", workflow, mlflow__spanOutputs={"output_type": "str"}, handoffs=[])
    gen = mlflow_span(
        "Generation",
        "CHAT_MODEL",
        agent,
        mlflow__spanInputs=[{"role": "user", "content": "Rome?"}],
        mlflow__spanOutputs=[{"role": "assistant", "content": "Warm."}],
    )
    [run] = extract_runs([group, runner, workflow, agent, gen]).runs
    assert (run.agent_name, texts(run.input_messages), run.output[-1].content) == (
        "assistant",
        [("user", "Rome?")],
        "Warm.",
    )
