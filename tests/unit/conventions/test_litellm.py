"""LiteLLM's own OpenTelemetry callback: raw_gen_ai_request spans (Python reprs) are the model
calls; a span LiteLLM wrote its keys onto (the app's span: the last call's keys and stale ones)
is the run, never a model call; its GenAI variant (OpenAI keys beside parts, tool calls only in
gen_ai.completion.N.function_call.*)."""

from __future__ import annotations

import json
from typing import Any

from sdk_spans import span, texts, tool_calls

from tracescorer.conventions import extract_runs
from tracescorer.conventions.common import parse_messages
from tracescorer.model import Span

SYSTEM = {"role": "system", "content": "Brief."}
USER = {"role": "user", "content": "Rome?"}
CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}


def raw_request(parent: Span, messages: list[dict[str, Any]], message: dict[str, Any], tokens: int) -> Span:
    """LiteLLM's raw_gen_ai_request: the provider's request and response fields as str(value)."""
    return span(
        "raw_gen_ai_request",
        parent,
        scope="litellm",
        llm__openai__messages=str(messages),
        llm__openai__model="gpt-4o-mini",
        llm__openai__choices=str([{"finish_reason": "stop", "index": 0, "message": message}]),
        llm__openai__usage=str({"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": tokens + 1}),
    )


def test_litellm_parts_carry_openai_tool_keys_beside_them() -> None:
    turns = parse_messages(
        json.dumps(
            [
                {"role": "assistant", "parts": [], "tool_calls": [CALL]},
                {"role": "tool", "parts": [{"type": "text", "content": "warm"}], "tool_call_id": "c1"},
            ]
        )
    )
    assert tool_calls(turns[0]) == [("c1", "get_weather", {"city": "Rome"})]
    assert [(p.type, p.id, p.response) for p in turns[1].parts] == [("tool_call_response", "c1", "warm")]


def test_an_app_span_litellm_wrote_on_is_the_run_its_raw_children_the_calls() -> None:
    stale = {
        "litellm.call_id": "x2",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "stale"}]}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Warm."}]}]),
        "gen_ai.completion.0.function_call.name": "get_weather",  # left by the first call
        "gen_ai.operation.name": "chat",
    }
    app = span("support_agent", scope="my-app", **{k.replace(".", "__"): v for k, v in stale.items()})
    tool_turn = {"role": "tool", "tool_call_id": "c1", "content": "warm"}
    first = raw_request(app, [SYSTEM, USER], {"role": "assistant", "content": None, "tool_calls": [CALL]}, 10)
    second = raw_request(
        app,
        [SYSTEM, USER, {"role": "assistant", "tool_calls": [CALL]}, tool_turn],
        {"role": "assistant", "content": "Warm."},
        20,
    )
    [run] = extract_runs([app, first, second]).runs
    assert run.agent_name == "support_agent"
    assert texts(run.input_messages) == [("user", "Rome?")]
    assert [m.content for m in run.system_messages] == ["Brief."]
    assert run.output[-1].content == "Warm."
    [tc] = run.tool_calls
    assert (tc.id, tc.name, tc.arguments, tc.result) == ("c1", "get_weather", {"city": "Rome"}, "warm")
    assert run.attributes["tracescorer.llm_calls"] == 2
    assert run.usage == {"input_tokens": 30, "output_tokens": 2, "total_tokens": 32}


def test_a_litellm_request_span_alone_keeps_its_input_and_tool_calls() -> None:
    request = span(
        "litellm_request",
        scope="litellm",
        **{
            "litellm.call_id": "x1",
            "llm.request.type": "completion",
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Rome?"}]}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [], "finish_reason": "tool_calls"}]),
            "gen_ai.completion.0.function_call.name": "get_weather",
            "gen_ai.completion.0.function_call.arguments": '{"city": "Rome"}',
        },
    )
    [run] = extract_runs([request]).runs
    assert texts(run.input_messages) == [("user", "Rome?")]
    assert [(t.name, t.arguments) for t in run.tool_calls] == [("get_weather", {"city": "Rome"})]
    assert "tracescorer.content_captured" not in run.attributes


def test_an_app_span_above_litellms_own_request_span_names_the_run() -> None:
    """USE_OTEL_LITELLM_REQUEST_SPAN: LiteLLM keeps its litellm_request span under the app's."""
    app = span("support_agent", scope="my-app")
    request = span(
        "litellm_request",
        app,
        scope="litellm",
        **{"litellm.call_id": "x1", "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"},
    )
    raw = raw_request(request, [SYSTEM, USER], {"role": "assistant", "content": "Warm."}, 5)
    [run] = extract_runs([app, request, raw]).runs
    assert (run.agent_name, run.output[-1].content, run.attributes["tracescorer.llm_calls"]) == (
        "support_agent",
        "Warm.",
        1,
    )


def test_tool_calls_written_both_as_parts_and_beside_them_count_once() -> None:
    part = {"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Rome"}}
    [turn] = parse_messages([{"role": "assistant", "parts": [part], "tool_calls": [CALL]}])
    assert tool_calls(turn) == [("c1", "get_weather", {"city": "Rome"})]
