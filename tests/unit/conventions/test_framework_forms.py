"""Framework-specific forms, one module each: Python reprs (Haystack), content blocks (Strands),
google.genai parts and ADK's additions, Logfire's Responses items, LangChain's serialised objects
and Traceloop's callback payloads; and the registration records they come in."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from tracescorer.conventions import CONVENTIONS, names, pyrepr
from tracescorer.conventions.adk import unwrap_result
from tracescorer.conventions.common import parse_messages, register_part_shapes, unwrap_tool_output
from tracescorer.conventions.haystack import chat_message, chat_messages
from tracescorer.conventions.langchain import _tool_arguments
from tracescorer.conventions.logfire import responses_items
from tracescorer.conventions.strands import block_text
from tracescorer.filters import RunFilter

# --- Python reprs (Haystack) ------------------------------------------------------------------

TOOL_TURN = (
    "ChatMessage(_role=<ChatRole.ASSISTANT: 'assistant'>, _content=[ToolCall(tool_name='get_weather', "
    "arguments={'city': 'Berlin'}, id='call_2', extra=None)], _name=None, _meta={'model': 'gpt-4o-mini', "
    "'finish_reason': 'tool_calls', 'usage': {'completion_tokens': 1, 'prompt_tokens_details': None}})"
)
TOOL_RESULT = (
    "ChatMessage(_role=<ChatRole.TOOL: 'tool'>, _content=[ToolCallResult(result='Cloudy, 15C', "
    "origin=ToolCall(tool_name='get_weather', arguments={'city': 'Berlin'}, id='call_2', extra=None), "
    "error=False)], _name=None, _meta={})"
)


def test_haystack_reprs_give_messages_tool_calls_and_results() -> None:
    user = chat_message(
        "ChatMessage(_role=<ChatRole.USER: 'user'>, _content=[TextContent(text='It\\'s \"cold\"?\\n')], "
        "_name=None, _meta={})"
    )
    assert user is not None and (user.role, user.content) == ("user", 'It\'s "cold"?\n')
    call = chat_message(TOOL_TURN)
    assert call is not None and call.role == "assistant" and call.finish_reason == "tool_calls"
    assert [(p.type, p.id, p.name, p.arguments) for p in call.parts] == [
        ("tool_call", "call_2", "get_weather", {"city": "Berlin"})
    ]
    result = chat_message(TOOL_RESULT)
    assert result is not None and result.role == "tool"
    assert [(p.type, p.id, p.response) for p in result.parts] == [("tool_call_response", "call_2", "Cloudy, 15C")]


def test_haystack_older_repr_layout_and_json_wrapper() -> None:
    old = "ChatMessage(content='Hello', role=<ChatRole.USER: 'user'>, name=None, meta={})"
    assert [(m.role, m.content) for m in chat_messages(json.dumps({"messages": [old, TOOL_TURN]}))] == [
        ("user", "Hello"),
        ("assistant", ""),
    ]


@pytest.mark.parametrize(
    "junk",
    [
        "ChatMessage(",
        "ChatMessage(_role=<ChatRole.USER: 'user'>, _content=[TextContent(text='x'",
        "ChatMessage)",
        "ChatMessage(_role=" + "[" * 100 + "]" * 100 + ")",
        "ChatMessage(_content=__import__('os').system('x'))",
        "not a message",
        42,
        None,
    ],
)
def test_unreadable_reprs_give_no_message_and_never_run_code(junk: Any) -> None:
    msg = chat_message(junk)
    assert msg is None or all(p.type != "text" or "import" not in (p.content or "") for p in msg.parts)


def test_repr_parser_limits() -> None:
    with pytest.raises(pyrepr.ReprError):
        pyrepr.parse("[" * (pyrepr.MAX_DEPTH + 5) + "]" * (pyrepr.MAX_DEPTH + 5))
    with pytest.raises(pyrepr.ReprError):
        pyrepr.parse("'" + "x" * pyrepr.MAX_CHARS + "'")
    assert pyrepr.parse("Point(1, y=-2.5, tags={'a', 'b'}, when=<object at 0x7f>)") == {
        "__class__": "Point",
        "__args__": [1],
        "y": -2.5,
        "tags": ["a", "b"],
        "when": "<object at 0x7f>",
    }


# --- content blocks (Strands), google.genai parts (ADK) ---------------------------------------


def test_strands_content_blocks() -> None:
    (assistant, tool) = parse_messages(
        [
            {
                "role": "assistant",
                "content": [
                    {"text": "Checking."},
                    {"toolUse": {"toolUseId": "t1", "name": "get_weather", "input": {"city": "Paris"}}},
                ],
            },
            {
                "role": "tool",
                "content": [
                    {"toolResult": {"toolUseId": "t1", "status": "error", "content": [{"text": "no such city"}]}}
                ],
            },
        ]
    )
    assert assistant.content == "Checking."
    assert [(p.type, p.id, p.arguments) for p in assistant.parts] == [
        ("text", None, None),
        ("tool_call", "t1", {"city": "Paris"}),
    ]
    assert [(p.type, p.id, p.response, p.extra) for p in tool.parts] == [
        ("tool_call_response", "t1", "no such city", {"is_error": True})
    ]
    assert block_text('[{"text": "a"}, {"text": "b"}]') == "a\nb"
    assert block_text([{"json": {"x": 1}}]) == [{"json": {"x": 1}}]


def test_google_genai_parts_and_adk_additions() -> None:
    (model, user) = parse_messages(
        [
            {
                "role": "model",
                "parts": [
                    {"thought": True, "text": "hmm"},
                    {"functionCall": {"id": "c1", "name": "get_weather", "args": {"city": "Rome"}}},
                ],
            },
            {
                "role": "user",
                "parts": [{"function_response": {"id": "c1", "name": "get_weather", "response": {"result": "Warm"}}}],
            },
        ]
    )
    assert model.role == "assistant"
    assert [(p.type, p.content, p.arguments) for p in model.parts] == [
        ("reasoning", "hmm", None),
        ("tool_call", None, {"city": "Rome"}),
    ]
    assert [(p.type, p.response) for p in user.parts] == [("tool_call_response", "Warm")]
    assert unwrap_result('{"result": {"t": 3}}') == {"t": 3}
    assert unwrap_result({"result": 1, "other": 2}) == {"result": 1, "other": 2}


# --- Logfire, LangChain, Traceloop ------------------------------------------------------------


def test_logfire_responses_items() -> None:
    msgs = responses_items(
        json.dumps(
            [
                {"role": "user", "content": "Weather in Oslo?"},
                {"type": "function_call", "call_id": "fc1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
                {"type": "function_call_output", "call_id": "fc1", "output": "Snow"},
            ]
        )
    )
    assert [m.role for m in msgs] == ["user", "assistant", "tool"]
    assert msgs[1].tool_calls[0].arguments == {"city": "Oslo"}
    assert (msgs[2].parts[0].id, msgs[2].parts[0].response) == ("fc1", "Snow")


def test_langchain_serialised_messages_and_tool_outputs() -> None:
    lc = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain_core", "messages", "AIMessage"],
        "kwargs": {"content": "", "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}, "id": "c9"}]},
    }
    old = {"type": "human", "data": {"content": "Weather in Oslo?"}}
    (human, ai) = parse_messages([old, lc])
    assert (human.role, human.content) == ("user", "Weather in Oslo?")
    assert [(p.name, p.id, p.arguments) for p in ai.tool_calls] == [("get_weather", "c9", {"city": "Oslo"})]
    tool_msg = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain_core", "messages", "ToolMessage"],
        "kwargs": {"content": "Snow", "tool_call_id": "c9"},
    }
    assert unwrap_tool_output({"output": tool_msg}) == ("Snow", "c9")
    assert unwrap_tool_output({"type": "tool", "data": {"content": "Snow", "tool_call_id": "c9"}}) == ("Snow", "c9")
    assert unwrap_tool_output({"output": "plain"}) == ({"output": "plain"}, None)
    assert unwrap_tool_output({"blocks": [], "tool_name": "t", "raw_output": 3}) == (3, None)  # LlamaIndex


def test_traceloop_callback_payload_arguments() -> None:
    assert _tool_arguments(json.dumps({"input_str": "{'city': 'Paris'}", "tags": [], "metadata": {}})) == {
        "city": "Paris"
    }
    assert _tool_arguments({"inputs": {"q": 1}, "input_str": "ignored"}) == {"q": 1}
    assert _tool_arguments({"input_str": "plain words"}) == "plain words"
    assert _tool_arguments('{"city": "Rome"}') == {"city": "Rome"}


# --- records ----------------------------------------------------------------------------------


def test_one_record_per_convention_and_the_names_they_give() -> None:
    assert len({c.name for c in CONVENTIONS}) == len(CONVENTIONS)
    assert set(names()) == {
        "pydantic_ai",
        "mastra",
        "vercel",
        "logfire",
        "langfuse",
        "mlflow",
        "langsmith",
        "openinference",
        "genai",
        "openllmetry",
        "generic",
    }
    bases = set(names())
    assert all(c.run_label in bases for c in CONVENTIONS)


def test_a_part_shape_claimed_twice_is_an_error() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_part_shapes("other", {"text": lambda raw: None}, {})


def test_filters_accept_exactly_the_convention_names() -> None:
    assert RunFilter.model_validate({"convention": ["logfire", "genai"]}).convention == ["logfire", "genai"]
    with pytest.raises(ValidationError, match="unknown convention 'otel'; known: .*logfire"):
        RunFilter.model_validate({"convention": "otel"})
