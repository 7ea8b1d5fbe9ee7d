"""OpenInference, OpenLLMetry/Traceloop, Vercel AI SDK, Mastra and pydantic-ai, from synthetic
spans written to each published convention (shapes beyond the captured samples)."""

from __future__ import annotations

import json
from itertools import count
from typing import Any

from tracescorer.conventions import extract_runs
from tracescorer.model import Span

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
_ids = count(1)
_clock = count(1_000)


def span(name: str, parent: str | None = None, trace: str = TRACE, **attrs: Any) -> Span:
    start = next(_clock) * 1_000_000
    return Span(
        trace_id=trace,
        span_id=f"{next(_ids):016x}",
        parent_span_id=parent,
        name=name,
        kind="internal",
        start_time_unix_nano=start,
        end_time_unix_nano=start + 500_000,
        attributes=attrs,
    )


def texts(messages: Any) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


# --- OpenInference ----------------------------------------------------------------------------


def test_openinference_index_gaps_contents_and_nested_agent_nodes() -> None:
    agent = span(
        "support",
        **{
            "openinference.span.kind": "AGENT",
            "session.id": "s-1",
            "user.id": "u-1",
            "input.value": "Where is my parcel?",
            "input.mime_type": "text/plain",
        },
    )
    # A graph node of the same agent, also marked AGENT: not a run of its own.
    node = span("support", parent=agent.span_id, **{"openinference.span.kind": "AGENT"})
    chain = span(
        "chain",
        parent=node.span_id,
        **{
            "openinference.span.kind": "CHAIN",
            # stale message attributes on an intermediate chain: must not be read as a model call
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "Where is my parcel?",
        },
    )
    llm = span(
        "ChatCompletion",
        parent=chain.span_id,
        **{
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-x",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "Be nice.",
            "llm.input_messages.3.message.role": "user",  # gap: 1 and 2 are missing
            "llm.input_messages.3.message.contents.0.message_content.type": "text",
            "llm.input_messages.3.message.contents.0.message_content.text": "Where is my parcel?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.tool_calls.0.tool_call.id": "t1",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "track",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"id": "P1"}',
            "llm.token_count.prompt": 7,
            "llm.token_count.completion": 3,
        },
    )
    tool = span(
        "track",
        parent=chain.span_id,
        **{
            "openinference.span.kind": "TOOL",
            "tool.name": "track",
            "input.value": '{"id": "P1"}',
            "output.value": "In transit",
        },
    )
    llm2 = span(
        "ChatCompletion",
        parent=chain.span_id,
        **{
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "Where is my parcel?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "It is in transit.",
        },
    )
    ex = extract_runs([llm2, tool, llm, chain, node, agent])
    (run,) = ex.runs
    assert run.convention == "openinference"
    assert (run.agent_name, run.conversation_id, run.resource_id) == ("support", "s-1", "u-1")
    assert texts(run.input_messages) == [("user", "Where is my parcel?")]
    assert [m.content for m in run.system_messages] == ["Be nice."]
    assert run.remembered_messages == ()
    assert run.output[-1].content == "It is in transit."
    (tc,) = run.tool_calls
    assert (tc.id, tc.name, tc.arguments, tc.result) == ("t1", "track", {"id": "P1"}, "In transit")
    assert run.attributes["tracescorer.llm_calls"] == 2
    assert run.usage == {"input_tokens": 7, "output_tokens": 3}


def test_openinference_llm_from_input_value_without_flattened_messages() -> None:
    llm = span(
        "llm",
        **{
            "openinference.span.kind": "LLM",
            "input.value": json.dumps({"messages": [{"role": "user", "content": "hi"}]}),
            "input.mime_type": "application/json",
            "output.value": json.dumps({"choices": [{"message": {"role": "assistant", "content": "hello"}}]}),
        },
    )
    (run,) = extract_runs([llm]).runs
    assert texts(run.input_messages) == [("user", "hi")]
    assert texts(run.output) == [("assistant", "hello")]


# --- OpenLLMetry / Traceloop ------------------------------------------------------------------


def test_openllmetry_numbered_keys_with_gaps_and_workflow_root() -> None:
    wf = span(
        "plan.workflow",
        **{
            "traceloop.span.kind": "workflow",
            "traceloop.workflow.name": "plan",
            "traceloop.association.properties.session_id": "tl-s",
        },
    )
    llm = span(
        "openai.chat",
        parent=wf.span_id,
        **{
            "llm.request.type": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "sys",
            "gen_ai.prompt.2.role": "user",
            "gen_ai.prompt.2.content": "go",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "ok",
            "gen_ai.usage.prompt_tokens": 4,
            "gen_ai.usage.completion_tokens": 1,
        },
    )
    (run,) = extract_runs([llm, wf]).runs
    assert run.convention == "openllmetry"
    assert (run.agent_name, run.conversation_id) == ("plan", "tl-s")
    assert texts(run.input_messages) == [("user", "go")]
    assert [m.content for m in run.system_messages] == ["sys"]
    assert texts(run.output) == [("assistant", "ok")]
    assert run.usage == {"input_tokens": 4, "output_tokens": 1}


def test_traceloop_workflow_with_agent_below_is_not_a_run() -> None:
    wf = span("wf", **{"traceloop.span.kind": "workflow", "traceloop.workflow.name": "wf"})
    ag = span(
        "a.agent",
        parent=wf.span_id,
        **{"traceloop.span.kind": "agent", "traceloop.entity.name": "a", "traceloop.entity.output": '"fine"'},
    )
    (run,) = extract_runs([wf, ag]).runs
    assert run.agent_name == "a" and texts(run.output) == [("assistant", "fine")]
    assert "tracescorer.content_captured" not in run.attributes


# --- Vercel AI SDK ----------------------------------------------------------------------------


def test_vercel_messages_history_metadata_and_tool_keys() -> None:
    history = [{"role": "user", "content": "I am Ada"}, {"role": "assistant", "content": "Hi Ada"}]
    root = span(
        "ai.streamText",
        **{
            "ai.operationId": "ai.streamText",
            "ai.telemetry.functionId": "bot",
            "ai.telemetry.metadata.threadId": "th-9",
            "ai.telemetry.metadata.userId": "ada",
            "ai.prompt": json.dumps({"system": "S", "messages": [*history, {"role": "user", "content": "weather?"}]}),
            "ai.response.text": "Sunny.",
        },
    )
    step = span(
        "ai.streamText.doStream",
        parent=root.span_id,
        **{
            "ai.operationId": "ai.streamText.doStream",
            "ai.model.id": "m",
            "ai.prompt.messages": json.dumps(
                [
                    {"role": "system", "content": "S"},
                    *history,
                    {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
                ]
            ),
            "ai.response.toolCalls": json.dumps(
                [{"toolCallId": "w1", "toolName": "weather", "input": '{"city":"Oslo"}'}]
            ),
            "ai.usage.inputTokens": 9,
            "ai.usage.outputTokens": 2,
        },
    )
    tool = span(
        "ai.toolCall",
        parent=root.span_id,
        **{
            "ai.operationId": "ai.toolCall",
            "ai.toolCall.name": "weather",
            "ai.toolCall.id": "w1",
            "ai.toolCall.input": '{"city":"Oslo"}',
            "ai.toolCall.output": '{"sky":"sun"}',
        },
    )
    step2 = span(
        "ai.streamText.doStream",
        parent=root.span_id,
        **{
            "ai.operationId": "ai.streamText.doStream",
            "ai.prompt.messages": json.dumps(
                [
                    {"role": "user", "content": "weather?"},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "tool-call", "toolCallId": "w1", "toolName": "weather", "input": {"city": "Oslo"}}
                        ],
                    },
                    {
                        "role": "tool",
                        "content": [
                            {
                                "type": "tool-result",
                                "toolCallId": "w1",
                                "toolName": "weather",
                                "output": {"type": "json", "value": {"sky": "sun"}},
                            }
                        ],
                    },
                ]
            ),
            "ai.response.text": "Sunny.",
        },
    )
    (run,) = extract_runs([step2, tool, step, root]).runs
    assert run.convention == "vercel"
    assert (run.agent_name, run.conversation_id, run.resource_id) == ("bot", "th-9", "ada")
    assert texts(run.input_messages) == [("user", "weather?")]
    assert texts(run.remembered_messages) == [("user", "I am Ada"), ("assistant", "Hi Ada")]
    assert [m.content for m in run.system_messages] == ["S"]
    assert run.output[-1].content == "Sunny."
    (tc,) = run.tool_calls
    assert (tc.id, tc.arguments, tc.result) == ("w1", {"city": "Oslo"}, {"sky": "sun"})


def test_vercel_v7_genai_form_with_context_keys() -> None:
    root = span(
        "invoke_agent bot",
        **{
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "bot",
            "ai.settings.context.conversationId": "c-7",
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "q"}]}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "a"}]}]),
        },
    )
    (run,) = extract_runs([root]).runs
    assert (run.convention, run.conversation_id, run.output[-1].content) == ("vercel", "c-7", "a")


# --- Mastra -----------------------------------------------------------------------------------


def test_mastra_title_generation_helper_call_is_not_the_run() -> None:
    agent = span(
        "invoke_agent chef",
        **{
            "mastra.span.type": "agent_run",
            "gen_ai.agent.name": "chef",
            "gen_ai.agent.id": "chef",
            "mastra.agent_run.input": "Give me a soup recipe",
            "gen_ai.system_instructions": "You cook.",
            "mastra.agent_run.output": json.dumps({"text": "Tomato soup: ..."}),
            "mastra.metadata.threadId": "t-1",
            "mastra.metadata.resourceId": "r-1",
        },
    )
    title = span(
        "model_generation m",
        parent=agent.span_id,
        **{
            "mastra.span.type": "model_generation",
            "mastra.model_generation.input": json.dumps(
                {
                    "messages": [
                        {"role": "system", "content": "Generate a short title for the conversation."},
                        {"role": "user", "content": "Title for: Give me a soup recipe"},
                    ]
                }
            ),
            "mastra.model_generation.output": json.dumps({"text": "Soup recipe"}),
        },
    )
    gen = span(
        "model_generation m",
        parent=agent.span_id,
        **{
            "mastra.span.type": "model_generation",
            "mastra.model_generation.input": json.dumps(
                {
                    "messages": [
                        {"role": "system", "content": "You cook."},
                        {"role": "user", "content": [{"type": "text", "text": "Give me a soup recipe"}]},
                    ]
                }
            ),
            "mastra.model_generation.output": json.dumps({"text": "Tomato soup: ..."}),
        },
    )
    (run,) = extract_runs([agent, title, gen]).runs
    assert run.convention == "mastra"
    assert (run.conversation_id, run.resource_id) == ("t-1", "r-1")
    assert texts(run.input_messages) == [("user", "Give me a soup recipe")]
    assert [m.content for m in run.system_messages] == ["You cook."]
    assert [m.content for m in run.output] == ["Tomato soup: ..."]


def test_mastra_v0_bare_thread_id_and_message_list_input() -> None:
    agent = span(
        "agent.helper",
        **{
            "mastra.span.type": "agent_run",
            "agent.id": "helper",
            "threadId": "t0",
            "resourceId": "r0",
            "input": json.dumps(
                [
                    {"role": "user", "content": "first"},
                    {"role": "assistant", "content": "reply"},
                    {"role": "user", "content": "second"},
                ]
            ),
            "output": json.dumps({"text": "answer"}),
        },
    )
    (run,) = extract_runs([agent]).runs
    assert (run.agent_name, run.conversation_id, run.resource_id) == ("helper", "t0", "r0")
    assert texts(run.input_messages) == [("user", "second")]
    assert texts(run.remembered_messages) == [("user", "first"), ("assistant", "reply")]
    assert texts(run.output) == [("assistant", "answer")]


# --- pydantic-ai ------------------------------------------------------------------------------


def test_pydantic_ai_tool_results_as_user_are_not_input() -> None:
    all_messages = [
        {"role": "system", "parts": [{"type": "text", "content": "sys"}]},
        {"role": "user", "parts": [{"type": "text", "content": "q"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c", "name": "f", "arguments": '{"x":1}'}]},
        {"role": "user", "parts": [{"type": "tool_call_response", "id": "c", "name": "f", "result": "R"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "done"}]},
    ]
    agent = span(
        "agent run",
        **{
            "agent_name": "pa",
            "pydantic_ai.all_messages": json.dumps(all_messages),
            "final_result": "done",
            "gen_ai.aggregated_usage.input_tokens": 3,
        },
    )
    (run,) = extract_runs([agent]).runs
    assert run.convention == "pydantic_ai" and run.agent_name == "pa"
    assert texts(run.input_messages) == [("user", "q")]
    assert run.remembered_messages == ()
    assert [m.content for m in run.output] == ["", "done"]
    assert [(t.arguments, t.result) for t in run.tool_calls] == [({"x": 1}, "R")]
    assert run.usage == {"input_tokens": 3}


def test_pydantic_ai_older_all_messages_events() -> None:
    events = [
        {"role": "system", "content": "sys", "event.name": "gen_ai.system.message"},
        {"role": "user", "content": "q", "event.name": "gen_ai.user.message"},
        {"index": 0, "message": {"role": "assistant", "content": "a"}, "event.name": "gen_ai.choice"},
    ]
    agent = span("agent run", agent_name="old", all_messages_events=json.dumps(events), final_result="a")
    (run,) = extract_runs([agent]).runs
    assert texts(run.input_messages) == [("user", "q")]
    assert texts(run.output) == [("assistant", "a")]
