"""Content capture off or masked: runs keep their structure, never the shape as content.

Synthetic spans in the shapes real libraries emit with content turned off: pydantic-ai
``InstrumentationSettings(include_content=False)`` (messages listed as parts without text,
tool calls with id and name only), OpenInference ``TraceConfig(hide_inputs/hide_outputs/
hide_input_text)`` (``"__REDACTED__"`` in place of values), and every adapter's tool span without
arguments (``tool_calls[].arguments`` is None = unknown, never ``{}``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from itertools import count
from typing import Any

import pytest

from tracescorer.conventions import extract_runs
from tracescorer.conventions.common import has_content, parse_arguments, parse_messages
from tracescorer.model import AgentRun, Span

TRACE1, TRACE2 = "a" * 32, "b" * 32
REDACTED = "__REDACTED__"  # openinference.instrumentation.REDACTED_VALUE
_ids = count(1)
_clock = count(1_000)


def span(name: str, parent: Span | None = None, trace: str = TRACE1, /, **attrs: Any) -> Span:
    start = next(_clock) * 1_000_000
    return Span(
        trace_id=trace,
        span_id=f"{next(_ids):016x}",
        parent_span_id=parent.span_id if parent is not None else None,
        name=name,
        kind="internal",
        start_time_unix_nano=start,
        end_time_unix_nano=start + 500_000,
        attributes=attrs,
    )


def finish(s: Span) -> Span:
    """The span ending after everything started so far (parents end after their children)."""
    end = next(_clock) * 1_000_000
    return replace(s, end_time_unix_nano=end)


def assert_no_content(run: AgentRun) -> None:
    assert run.attributes["tracescorer.content_captured"] is False
    assert run.input_messages == ()
    assert run.remembered_messages == ()
    assert run.system_messages == ()
    assert run.output == ()
    assert run.tagged_system_messages == {}


def calls_of(run: AgentRun) -> list[tuple[str | None, str, Any, Any]]:
    return [(t.id, t.name, t.arguments, t.result) for t in run.tool_calls]


# --- pydantic-ai, include_content=False -------------------------------------------------------

USER_TURN: dict[str, Any] = {"role": "user", "parts": [{"type": "text"}]}
TOOL_CALL: dict[str, Any] = {
    "role": "assistant",
    "parts": [{"type": "tool_call", "id": "call_1", "name": "get_weather"}],
    "finish_reason": "tool_call",
}
TOOL_RESULT: dict[str, Any] = {
    "role": "user",
    "parts": [{"type": "tool_call_response", "id": "call_1", "name": "get_weather"}],
}
ANSWER: dict[str, Any] = {"role": "assistant", "parts": [{"type": "text"}], "finish_reason": "stop"}


def _pydantic_turn(
    trace: str, all_messages: list[Any], chats: list[tuple[list[Any], list[Any]]], tool_ids: tuple[str, ...] = ()
) -> list[Span]:
    agent = span(
        "invoke_agent weather_agent",
        None,
        trace,
        **{
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "weather_agent",
            "agent_name": "weather_agent",
            "gen_ai.conversation.id": "conv-1",
            "model_name": "gpt-4o-mini",
            "gen_ai.aggregated_usage.input_tokens": 31,
            "gen_ai.aggregated_usage.output_tokens": 8,
            "pydantic_ai.all_messages": json.dumps(all_messages),
        },
    )
    spans = []
    for i, (given, got) in enumerate(chats):
        spans.append(
            span(
                "chat gpt-4o-mini",
                agent,
                trace,
                **{
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.input.messages": json.dumps(given),
                    "gen_ai.output.messages": json.dumps(got),
                    "gen_ai.usage.input_tokens": 10 + i,
                    "gen_ai.usage.output_tokens": 1,
                },
            )
        )
        if i < len(tool_ids):
            spans.append(
                span(
                    "execute_tool get_weather",
                    agent,
                    trace,
                    **{
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "get_weather",
                        "gen_ai.tool.call.id": tool_ids[i],
                    },
                )
            )
    return [*spans, finish(agent)]


def test_structure_only_messages_carry_no_content() -> None:
    msgs = parse_messages([USER_TURN, TOOL_CALL, TOOL_RESULT, ANSWER])
    # the structure is kept (roles, tool ids and names) ...
    assert [m.role for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert [(p.id, p.name) for p in msgs[1].parts] == [("call_1", "get_weather")]
    # ... but none of it is content
    assert not any(has_content(m) for m in msgs)
    with_content = parse_messages(
        [
            {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
            {"role": "assistant", "parts": [{"type": "tool_call", "id": "c", "name": "f", "arguments": {}}]},
            {"role": "user", "parts": [{"type": "tool_call_response", "id": "c", "result": "R"}]},
            {"role": "user", "parts": [{"type": "uri", "modality": "image", "uri": "https://x/y.png"}]},
        ]
    )
    assert all(has_content(m) for m in with_content)
    blob_without_data = parse_messages(
        [{"role": "user", "parts": [{"type": "blob", "modality": "image", "mime_type": "image/png"}]}]
    )
    assert not has_content(blob_without_data[0])


def test_pydantic_ai_include_content_false_two_turns() -> None:
    first = _pydantic_turn(
        TRACE1,
        [USER_TURN, TOOL_CALL, TOOL_RESULT, ANSWER],
        [([USER_TURN], [TOOL_CALL]), ([USER_TURN, TOOL_CALL, TOOL_RESULT], [ANSWER])],
        tool_ids=("call_1",),
    )
    second = _pydantic_turn(
        TRACE2,
        [USER_TURN, TOOL_CALL, TOOL_RESULT, ANSWER, USER_TURN, ANSWER],
        [([USER_TURN, TOOL_CALL, TOOL_RESULT, ANSWER, USER_TURN], [ANSWER])],
    )
    ex = extract_runs(first + second)
    assert ex.unmatched_reason is None
    run1, run2 = ex.runs
    for run in (run1, run2):
        assert run.convention == "pydantic_ai" and run.agent_name == "weather_agent"
        assert run.conversation_id == "conv-1" and run.model == "gpt-4o-mini"
        assert_no_content(run)  # the run's own tool round-trip is not history either
    assert [r.attributes["tracescorer.llm_calls"] for r in (run1, run2)] == [2, 1]
    assert run1.usage == {"input_tokens": 31, "output_tokens": 8}
    # ids and names of the tool calls are still known; arguments and result are not
    assert calls_of(run1) == [("call_1", "get_weather", None, None)]
    assert run2.tool_calls == ()


def test_pydantic_ai_uncaptured_user_text_still_splits_history_from_own_tool_turns() -> None:
    """The user's text is missing but tool content is there: the content-less user turn still
    marks where this run began, so the run's tool round-trip is output, not history."""
    call = {**TOOL_CALL, "parts": [{**TOOL_CALL["parts"][0], "arguments": {"city": "Paris"}}]}
    result = {**TOOL_RESULT, "parts": [{**TOOL_RESULT["parts"][0], "result": "sunny"}]}
    (run1,) = extract_runs(_pydantic_turn(TRACE1, [USER_TURN, call, result, ANSWER], [])).runs
    assert run1.remembered_messages == () and run1.input_messages == ()
    assert [[p.type for p in m.parts] for m in run1.output] == [["tool_call"]]
    assert calls_of(run1) == [("call_1", "get_weather", {"city": "Paris"}, "sunny")]
    assert "tracescorer.content_captured" not in run1.attributes

    (run2,) = extract_runs(_pydantic_turn(TRACE2, [USER_TURN, call, result, ANSWER, USER_TURN, ANSWER], [])).runs
    # turn 1's round trip is history now; the content-less messages are not kept
    assert [[p.type for p in m.parts] for m in run2.remembered_messages] == [["tool_call"], ["tool_call_response"]]
    assert run2.input_messages == () and run2.output == () and run2.tool_calls == ()


def test_pydantic_ai_transcript_without_content_over_model_spans_with_content() -> None:
    """pydantic-ai with include_content=False over an OpenAI instrumentation that records
    content: the structure-only transcript gives way to the model calls' messages."""
    agent = span(
        "invoke_agent weather_agent",
        **{
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "weather_agent",
            "pydantic_ai.all_messages": json.dumps([USER_TURN, ANSWER]),
        },
    )
    outer = span(
        "chat gpt-4o-mini",
        agent,
        **{
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([USER_TURN]),
            "gen_ai.output.messages": json.dumps([ANSWER]),
        },
    )
    inner = span(
        "chat gpt-4o-mini",
        outer,
        **{
            "gen_ai.operation.name": "chat",
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Hi?"}]}]),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "Hello."}]}]
            ),
        },
    )
    (run,) = extract_runs([finish(agent), outer, inner]).runs
    assert run.convention == "pydantic_ai"
    assert [m.content for m in run.system_messages] == ["Be brief."]
    assert [(m.role, m.content) for m in run.input_messages] == [("user", "Hi?")]
    assert [(m.role, m.content) for m in run.output] == [("assistant", "Hello.")]
    assert "tracescorer.content_captured" not in run.attributes


# --- OpenInference, TraceConfig(hide_inputs=True, hide_outputs=True) ---------------------------


def _openinference_hidden_turn(trace: str, llm_outputs: int) -> list[Span]:
    hidden = {"input.value": REDACTED, "output.value": REDACTED, "session.id": "sess-1"}
    agent = span("weather-agent", None, trace, **{"openinference.span.kind": "AGENT", **hidden})
    spans: list[Span] = []
    for i in range(llm_outputs):
        spans.append(
            span(
                "ChatCompletion",
                agent,
                trace,
                **{
                    "openinference.span.kind": "LLM",
                    "llm.model_name": "gpt-4o-mini",
                    "llm.token_count.prompt": 14,
                    "llm.token_count.completion": 1,
                    **hidden,
                },
            )
        )
        if i == 0 and llm_outputs > 1:
            spans.append(
                span(
                    "get_weather",
                    agent,
                    trace,
                    **{
                        "openinference.span.kind": "TOOL",
                        "tool.name": "get_weather",
                        "tool.parameters": json.dumps({"type": "object", "properties": {"city": {"type": "string"}}}),
                        **hidden,
                    },
                )
            )
    return [*spans, finish(agent)]


def test_openinference_hide_inputs_and_outputs() -> None:
    ex = extract_runs(_openinference_hidden_turn(TRACE1, 2) + _openinference_hidden_turn(TRACE2, 1))
    run1, run2 = ex.runs
    for run in (run1, run2):
        assert run.convention == "openinference" and run.agent_name == "weather-agent"
        assert run.conversation_id == "sess-1" and run.model == "gpt-4o-mini"
        assert_no_content(run)
        assert REDACTED not in json.dumps(run.to_dict())
    assert calls_of(run1) == [(None, "get_weather", None, None)]
    assert run2.tool_calls == ()
    assert [r.attributes["tracescorer.llm_calls"] for r in (run1, run2)] == [2, 1]


def test_openinference_hidden_message_text_keeps_structure() -> None:
    """hide_input_text: message texts are masked, roles and the outputs are not."""
    agent = span("weather-agent", **{"openinference.span.kind": "AGENT", "input.value": REDACTED})
    llm = span(
        "ChatCompletion",
        agent,
        **{
            "openinference.span.kind": "LLM",
            "input.value": REDACTED,
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": REDACTED,
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": REDACTED,
            "llm.input_messages.2.message.role": "assistant",
            "llm.input_messages.2.message.contents.0.message_content.type": "text",
            "llm.input_messages.2.message.contents.0.message_content.text": REDACTED,
            "llm.input_messages.3.message.role": "user",
            "llm.input_messages.3.message.contents.0.message_content.type": "text",
            "llm.input_messages.3.message.contents.0.message_content.text": REDACTED,
            "llm.input_messages.3.message.contents.1.message_content.type": "image",
            "llm.input_messages.3.message.contents.1.message_content.image.image.url": REDACTED,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "No umbrella needed.",
        },
    )
    (run,) = extract_runs([llm, finish(agent)]).runs
    assert run.input_messages == () and run.remembered_messages == () and run.system_messages == ()
    assert [(m.role, m.content) for m in run.output] == [("assistant", "No umbrella needed.")]
    assert "tracescorer.content_captured" not in run.attributes
    assert REDACTED not in json.dumps(run.to_dict())


# --- tool call arguments with content off: None (unknown) in every adapter ---------------------


def _genai() -> list[Span]:
    agent = span("invoke_agent a", **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"})
    return [
        finish(agent),
        span("chat m", agent, **{"gen_ai.operation.name": "chat"}),
        span(
            "execute_tool f",
            agent,
            **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "f", "gen_ai.tool.call.id": "t1"},
        ),
    ]


def _openinference() -> list[Span]:
    agent = span("a", **{"openinference.span.kind": "AGENT", "input.value": REDACTED})
    return [
        finish(agent),
        span(
            "f",
            agent,
            **{"openinference.span.kind": "TOOL", "tool.name": "f", "input.value": REDACTED, "output.value": REDACTED},
        ),
    ]


def _openllmetry() -> list[Span]:
    agent = span("a.agent", **{"traceloop.span.kind": "agent", "traceloop.entity.name": "a"})
    return [finish(agent), span("f.tool", agent, **{"traceloop.span.kind": "tool", "traceloop.entity.name": "f"})]


def _vercel() -> list[Span]:
    agent = span("ai.generateText", **{"ai.operationId": "ai.generateText", "ai.telemetry.functionId": "a"})
    return [
        finish(agent),
        span("ai.generateText.doGenerate", agent, **{"ai.operationId": "ai.generateText.doGenerate"}),
        span(
            "ai.toolCall", agent, **{"ai.operationId": "ai.toolCall", "ai.toolCall.name": "f", "ai.toolCall.id": "t1"}
        ),
    ]


def _mastra() -> list[Span]:
    agent = span("invoke_agent a", **{"mastra.span.type": "agent_run", "gen_ai.agent.name": "a"})
    return [
        finish(agent),
        span(
            "execute_tool f",
            agent,
            **{"mastra.span.type": "tool_call", "gen_ai.tool.name": "f", "gen_ai.tool.call.id": "t1"},
        ),
    ]


def _pydantic_ai() -> list[Span]:
    call = {"role": "assistant", "parts": [{"type": "tool_call", "id": "t1", "name": "f"}]}
    agent = span(
        "invoke_agent a",
        **{
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "a",
            "pydantic_ai.all_messages": json.dumps([USER_TURN, call, ANSWER]),
        },
    )
    return [
        finish(agent),
        span(
            "chat m",
            agent,
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps([USER_TURN]),
                "gen_ai.output.messages": json.dumps([call]),
            },
        ),
    ]


@pytest.mark.parametrize(
    ("convention", "build"),
    [
        ("genai", _genai),
        ("openinference", _openinference),
        ("openllmetry", _openllmetry),
        ("vercel", _vercel),
        ("mastra", _mastra),
        ("pydantic_ai", _pydantic_ai),
    ],
)
def test_tool_arguments_unknown_when_content_is_off(convention: str, build: Any) -> None:
    (run,) = extract_runs(build()).runs
    assert run.convention == convention
    assert_no_content(run)
    ((_, name, arguments, result),) = calls_of(run)
    assert name == "f"
    assert arguments is None and result is None  # unknown, not {} ("no arguments")
    assert run.to_dict()["tool_calls"][0]["arguments"] is None


def test_parse_arguments_nothing_recorded_is_none() -> None:
    assert parse_arguments(None) is None
    assert parse_arguments("") is None and parse_arguments("  ") is None
    assert parse_arguments("{}") == {}
    assert parse_arguments('{"city": "Paris"}') == {"city": "Paris"}
