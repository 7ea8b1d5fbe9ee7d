"""OTel GenAI conventions, built to the published spec (not only what the captures show)."""

from __future__ import annotations

import json
from itertools import count
from typing import Any

from tracescorer.conventions import extract_runs
from tracescorer.model import LogRecord, Resource, Span, SpanEvent

TRACE = "0af7651916cd43dd8448eb211c80319c"
_ids = count(1)
_clock = count(1_000)


def span(
    name: str,
    parent: str | None = None,
    sid: str | None = None,
    trace: str = TRACE,
    events: tuple[SpanEvent, ...] = (),
    status: str = "unset",
    **attrs: Any,
) -> Span:
    start = next(_clock) * 1_000_000
    return Span(
        trace_id=trace,
        span_id=sid or f"{next(_ids):016x}",
        parent_span_id=parent,
        name=name,
        kind="internal",
        start_time_unix_nano=start,
        end_time_unix_nano=start + 500_000,
        status_code=status,
        attributes=attrs,
        events=events,
        resource=Resource(attributes={"service.name": "svc"}),
    )


def msgs(*pairs: tuple[str, Any]) -> list[dict[str, Any]]:
    out = []
    for role, part in pairs:
        parts = [part] if isinstance(part, dict) else [{"type": "text", "content": part}]
        out.append({"role": role, "parts": parts})
    return out


def test_structured_messages_plain_string_system_and_result_key() -> None:
    agent = span(
        "invoke_agent helper",
        sid="a" * 16,
        **{
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "helper",
            "gen_ai.agent.id": "agt_1",
            "gen_ai.conversation.id": "conv-1",
            "gen_ai.system_instructions": "Be brief.",
        },
    )
    call1 = span(
        "chat m",
        parent=agent.span_id,
        **{
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            # structured (non-string) values, as an SDK may set them
            "gen_ai.input.messages": msgs(("user", "old q"), ("assistant", "old a"), ("user", "new q")),
            "gen_ai.output.messages": [
                {
                    "role": "assistant",
                    "parts": [{"type": "tool_call", "id": "c1", "name": "lookup", "arguments": '{"k": 1}'}],
                }
            ],
            "gen_ai.usage.input_tokens": 10,
            "gen_ai.usage.output_tokens": 2,
        },
    )
    tool = span(
        "execute_tool lookup",
        parent=agent.span_id,
        **{
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.id": "c1",
            "gen_ai.tool.call.arguments": '{"k": 1}',
        },
    )
    call2 = span(
        "chat m",
        parent=agent.span_id,
        **{
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(
                msgs(
                    ("user", "old q"),
                    ("assistant", "old a"),
                    ("user", "new q"),
                    ("assistant", {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"k": 1}}),
                    ("tool", {"type": "tool_call_response", "id": "c1", "result": {"v": 42}}),
                )
            ),
            "gen_ai.output.messages": json.dumps(msgs(("assistant", "It is 42."))),
            "gen_ai.usage.input_tokens": 20,
            "gen_ai.usage.output_tokens": 3,
        },
    )
    ex = extract_runs([call2, tool, call1, agent])
    assert ex.unmatched_reason is None
    (run,) = ex.runs
    assert (run.agent_name, run.agent_id, run.conversation_id) == ("helper", "agt_1", "conv-1")
    assert [m.content for m in run.system_messages] == ["Be brief."]
    assert [(m.role, m.content) for m in run.input_messages] == [("user", "new q")]
    assert [(m.role, m.content) for m in run.remembered_messages] == [("user", "old q"), ("assistant", "old a")]
    assert [m.content for m in run.output] == ["", "It is 42."]
    (tc,) = run.tool_calls
    assert (tc.id, tc.name, tc.arguments, tc.result) == ("c1", "lookup", {"k": 1}, {"v": 42})
    assert run.usage == {"input_tokens": 30, "output_tokens": 5}
    assert run.model == "m" and run.convention == "genai" and run.service_name == "svc"


def test_system_instructions_as_parts_and_agent_output_fallback() -> None:
    agent = span(
        "invoke_agent x",
        **{
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.system_instructions": json.dumps(
                [{"type": "text", "content": "S1"}, {"type": "text", "content": "S2"}]
            ),
            "gen_ai.input.messages": json.dumps(msgs(("user", "hi"))),
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [
                            {"type": "tool_call", "id": "t", "name": "f", "arguments": {}},
                            {"type": "text", "content": "done"},
                        ],
                        "finish_reason": "stop",
                    }
                ]
            ),
        },
    )
    (run,) = extract_runs([agent]).runs
    assert run.agent_name == "x"
    assert [m.content for m in run.system_messages] == ["S1\nS2"]
    assert [m.content for m in run.input_messages] == ["hi"]
    assert run.output[-1].content == "done"
    assert [t.name for t in run.tool_calls] == ["f"]


def _event(name: str, t: int, **attrs: Any) -> SpanEvent:
    return SpanEvent(name=name, time_unix_nano=t, attributes=attrs)


def test_events_as_span_events() -> None:
    call = span(
        "chat m",
        events=(
            _event("gen_ai.system.message", 1, content="sys"),
            _event("gen_ai.user.message", 2, content="q"),
            _event("gen_ai.choice", 3, message=json.dumps({"role": "assistant", "content": "a"}), finish_reason="stop"),
        ),
        **{"gen_ai.operation.name": "chat", "gen_ai.system": "openai"},
    )
    (run,) = extract_runs([call]).runs
    assert run.span_id == call.span_id  # no agent span: the model call itself is the run root
    assert [m.content for m in run.system_messages] == ["sys"]
    assert [m.content for m in run.input_messages] == ["q"]
    assert [m.content for m in run.output] == ["a"]


def _log(span_: Span, body: Any, name: str = "", *, attr_name: str = "", t: int = 0, **attrs: Any) -> LogRecord:
    if attr_name:
        attrs["event.name"] = attr_name
    return LogRecord(
        time_unix_nano=t,
        observed_time_unix_nano=t + 1,
        body=body,
        attributes=attrs,
        event_name=name,
        trace_id=span_.trace_id,
        span_id=span_.span_id,
    )


def test_events_as_log_records_with_event_name_attribute() -> None:
    root = span("app")
    call = span("chat m", parent=root.span_id, **{"gen_ai.operation.name": "chat"})
    logs = [
        _log(call, {"content": "q"}, attr_name="gen_ai.user.message", t=1),
        _log(
            call,
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a": "b"}'}}
                    ],
                },
            },
            name="gen_ai.choice",
            t=2,
        ),
        LogRecord(
            time_unix_nano=3, observed_time_unix_nano=3, body={"content": "ignored"}, event_name="gen_ai.user.message"
        ),  # no trace id: cannot be joined
    ]
    (run,) = extract_runs([call, root], logs).runs
    assert run.span_id == root.span_id and run.agent_name is None
    assert [m.content for m in run.input_messages] == ["q"]
    assert [(t.name, t.arguments) for t in run.tool_calls] == [("f", {"a": "b"})]


def test_inference_operation_details_log_record() -> None:
    call = span("chat m", **{"gen_ai.operation.name": "chat"})
    rec = _log(
        call,
        None,
        name="gen_ai.client.inference.operation.details",
        **{
            "gen_ai.input.messages": msgs(("user", "q")),
            "gen_ai.output.messages": msgs(("assistant", "a")),
            "gen_ai.system_instructions": [{"type": "text", "content": "sys"}],
        },
    )
    (run,) = extract_runs([call], [rec]).runs
    assert [m.content for m in run.system_messages] == ["sys"]
    assert [m.content for m in run.input_messages] == ["q"]
    assert [m.content for m in run.output] == ["a"]


def test_content_capture_off_gives_empty_run_with_flag() -> None:
    agent = span("invoke_agent a", **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"})
    call = span(
        "chat m",
        parent=agent.span_id,
        **{"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 5},
    )
    ex = extract_runs([agent, call])
    (run,) = ex.runs
    assert run.input_messages == () and run.output == () and run.system_messages == ()
    assert run.attributes["tracescorer.content_captured"] is False
    assert run.usage == {"input_tokens": 5} and run.model == "m"


def test_nested_agents_one_run_each_linked_by_parent() -> None:
    outer = span("invoke_agent boss", **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "boss"})
    c1 = span(
        "chat",
        parent=outer.span_id,
        **{
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(msgs(("user", "plan a trip"))),
            "gen_ai.output.messages": json.dumps(
                msgs(("assistant", {"type": "tool_call", "id": "s", "name": "scout", "arguments": {}}))
            ),
        },
    )
    tool = span(
        "execute_tool scout",
        parent=outer.span_id,
        **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "scout", "gen_ai.tool.call.id": "s"},
    )
    inner = span(
        "invoke_agent scout",
        parent=tool.span_id,
        **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "scout"},
    )
    c2 = span(
        "chat",
        parent=inner.span_id,
        **{
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(msgs(("user", "find hotels"))),
            "gen_ai.output.messages": json.dumps(msgs(("assistant", "3 hotels"))),
        },
    )
    runs = extract_runs([c2, inner, tool, c1, outer]).runs
    assert [r.agent_name for r in runs] == ["boss", "scout"]
    boss, scout = runs
    assert scout.parent_span_id == outer.span_id
    assert [m.content for m in boss.input_messages] == ["plan a trip"]
    assert [m.content for m in scout.input_messages] == ["find hotels"]
    assert boss.attributes["tracescorer.llm_calls"] == 1  # the nested agent's call is not the boss's
    assert [t.name for t in boss.tool_calls] == ["scout"]


def test_error_status_and_run_id_determinism() -> None:
    agent = span(
        "invoke_agent a",
        status="error",
        **{"gen_ai.operation.name": "invoke_agent"},
        events=(SpanEvent(name="exception", time_unix_nano=1, attributes={"exception.message": "boom"}),),
    )
    r1 = extract_runs([agent]).runs[0]
    r2 = extract_runs([agent]).runs[0]
    assert (r1.status, r1.error) == ("error", "boom")
    assert r1.run_id == r2.run_id and len(r1.run_id) == 32


def test_tool_error_tagged_model_context_and_configured_conversation_key() -> None:
    agent = span(
        "invoke_agent a",
        **{
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "a",
            "gen_ai.conversation.id": "std",
            "app.thread": "mine",
            "gen_ai.system_instructions": "Agent rules.",
        },
    )
    call = span(
        "chat m",
        parent=agent.span_id,
        **{
            "gen_ai.operation.name": "chat",
            "gen_ai.system_instructions": json.dumps(
                [{"type": "text", "content": "Agent rules."}, {"type": "text", "content": "Working memory: likes tea"}]
            ),
            "gen_ai.input.messages": json.dumps(msgs(("system", "Recalled: earlier chat"), ("user", "q"))),
            "gen_ai.output.messages": json.dumps(
                msgs(("assistant", {"type": "tool_call", "id": "x", "name": "fail", "arguments": "{}"}))
            ),
        },
    )
    tool = span(
        "execute_tool fail",
        parent=agent.span_id,
        status="error",
        **{
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "fail",
            "gen_ai.tool.call.id": "x",
            "error.type": "TimeoutError",
        },
    )
    (run,) = extract_runs([agent, call, tool], conversation_keys=["app.thread"]).runs
    assert run.conversation_id == "mine"
    assert [m.content for m in run.system_messages] == ["Agent rules."]
    assert [m.content for m in run.tagged_system_messages["model_context"]] == [
        "Agent rules.\nWorking memory: likes tea",
        "Recalled: earlier chat",
    ]
    (tc,) = run.tool_calls
    assert (tc.name, tc.arguments, tc.error) == ("fail", {}, "TimeoutError")
    (run2,) = extract_runs([agent, call, tool]).runs
    assert run2.conversation_id == "std"


def test_span_events_with_content_lists_as_json_strings() -> None:
    """Strands-style span events: content lists of bare ``{"text": ...}`` parts as JSON."""
    call = span(
        "chat",
        events=(
            _event("gen_ai.user.message", 1, content=json.dumps([{"text": "hello"}])),
            _event("gen_ai.choice", 2, message=json.dumps([{"text": "hi there"}]), finish_reason="end_turn"),
        ),
        **{"gen_ai.operation.name": "chat"},
    )
    (run,) = extract_runs([call]).runs
    assert [m.content for m in run.input_messages] == ["hello"]
    assert [m.content for m in run.output] == ["hi there"]


def test_history_added_by_memory_counts_as_remembered_not_input() -> None:
    """The agent span lists only the new turn; the model call shows the remembered history."""
    agent = span(
        "invoke_agent a",
        **{
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "a",
            "gen_ai.input.messages": json.dumps(msgs(("user", "and tomorrow?"))),
        },
    )
    call = span(
        "chat",
        parent=agent.span_id,
        **{
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(
                msgs(("user", "weather today?"), ("assistant", "sunny"), ("user", "and tomorrow?"))
            ),
            "gen_ai.output.messages": json.dumps(msgs(("assistant", "rain"))),
        },
    )
    (run,) = extract_runs([agent, call]).runs
    assert [m.content for m in run.input_messages] == ["and tomorrow?"]
    assert [(m.role, m.content) for m in run.remembered_messages] == [
        ("user", "weather today?"),
        ("assistant", "sunny"),
    ]
