"""Traced function calls and model requests as messages (conventions/calls.py): Langfuse's
``{"args", "kwargs"}`` records, MLflow's and LangSmith's arguments by parameter name, request
bodies and responses in the shapes client libraries record."""

from __future__ import annotations

import json

import pytest
from sdk_spans import texts, tool_calls

from tracescorer.conventions.calls import (
    call_input,
    is_message_list,
    request_messages,
    response_messages,
    tool_arguments,
)

HISTORY = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def test_the_one_string_argument_is_the_new_input_a_message_list_what_was_given() -> None:
    new, given = call_input(json.dumps({"args": [HISTORY, "Weather in Paris?"], "kwargs": {}}))
    assert texts(new) == [("user", "Weather in Paris?")]
    assert texts(given) == [("user", "Hi"), ("assistant", "Hello!")]
    # by parameter name (MLflow, LangSmith), and keyword arguments (Langfuse)
    assert texts(call_input({"history": HISTORY, "question": "Q?"})[0]) == [("user", "Q?")]
    assert texts(call_input({"args": [], "kwargs": {"question": "Q?"}})[0]) == [("user", "Q?")]
    # a plain string input, a message list, a request body
    assert texts(call_input("just text")[0]) == [("user", "just text")]
    assert texts(call_input(HISTORY)[1]) == texts(call_input({"messages": HISTORY})[1])


def test_several_string_arguments_name_no_input() -> None:
    new, given = call_input({"args": ["user-7", "What now?"], "kwargs": {}})
    assert new == [] and given == []


@pytest.mark.parametrize("value", [TOOLS, [{"type": "function", "name": "x"}], [], [1, 2], "text", None])
def test_a_tools_list_is_no_message_list(value: object) -> None:
    assert not is_message_list(value)


def test_langchain_message_forms_are_messages() -> None:
    dumped = {"lc": 1, "type": "constructor", "id": ["x", "HumanMessage"], "kwargs": {"content": "hi"}}
    flat = {"type": "ai", "content": "yo", "tool_calls": []}
    assert is_message_list([dumped, flat])
    assert texts(request_messages({"messages": [[dumped, flat]]})) == [("user", "hi"), ("assistant", "yo")]


def test_requests_in_every_recorded_shape() -> None:
    system = {"role": "system", "content": "Be brief."}
    assert texts(request_messages([system, *HISTORY])) == [
        ("system", "Be brief."),
        ("user", "Hi"),
        ("assistant", "Hello!"),
    ]
    assert texts(request_messages({"tools": TOOLS, "messages": HISTORY, "model": "m"})) == texts(
        request_messages(HISTORY)
    )
    # a decorated model-call function: the argument whose items are all messages, not the tools
    assert texts(request_messages({"args": [HISTORY, TOOLS], "kwargs": {}})) == texts(request_messages(HISTORY))
    assert texts(request_messages({"prompts": ["Complete this"]})) == [("user", "Complete this")]
    assert texts(request_messages({"args": ["Summarise this"], "kwargs": {}})) == [("user", "Summarise this")]
    responses = request_messages({"model": "m", "instructions": "Be brief.", "input": "Hi"})
    assert texts(responses) == [("system", "Be brief."), ("user", "Hi")]


def test_responses_in_every_recorded_shape() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}
    completion = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}
    [msg] = response_messages(json.dumps(completion))
    assert tool_calls(msg) == [("c1", "get_weather", {"city": "Rome"})]
    # the message the client returned (a ChatCompletionMessage dump), text, LangSmith's wrapping
    assert texts(response_messages({"role": "assistant", "content": "Sunny", "refusal": None})) == [
        ("assistant", "Sunny")
    ]
    assert texts(response_messages("Sunny")) == [("assistant", "Sunny")]
    assert texts(response_messages({"output": "Sunny"})) == [("assistant", "Sunny")]
    # a LangChain LLMResult
    generation = {"text": "Sunny", "message": {"lc": 1, "type": "constructor", "id": ["AIMessage"], "kwargs": {}}}
    assert texts(response_messages({"generations": [[{**generation, "message": None}]]})) == [("assistant", "Sunny")]
    # a graph's final state: its last assistant message
    state = {
        "messages": [
            {"type": "human", "content": "Q"},
            {"type": "ai", "content": "A1"},
            {"type": "ai", "content": "A2"},
        ]
    }
    assert texts(response_messages(state)) == [("assistant", "A2")]


def test_tool_arguments_from_call_records() -> None:
    assert tool_arguments('{"args": [], "kwargs": {"city": "Rome"}}') == {"city": "Rome"}
    assert tool_arguments({"args": ["Rome"], "kwargs": {}}) == "Rome"
    assert tool_arguments({"args": ["Rome", 3], "kwargs": {"unit": "C"}}) == {"args": ["Rome", 3], "unit": "C"}
    assert tool_arguments({"city": "Rome"}) == {"city": "Rome"}
    assert tool_arguments("") is None


def test_one_prompt_of_a_batch_is_the_request() -> None:
    assert texts(request_messages([HISTORY])) == texts(request_messages(HISTORY))
