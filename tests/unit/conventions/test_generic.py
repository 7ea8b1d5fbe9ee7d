"""The last resort: a trace no convention claims still gives the model calls its spans carry
(conventions/generic.py), and an unmatched trace says what it carried."""

from __future__ import annotations

import json

from sdk_spans import span, texts

from tracescorer.conventions import extract_runs

CALL = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}


def test_llm_looking_spans_of_an_unknown_sdk_give_a_run() -> None:
    root = span("handle_chat", scope="my-sdk", **{"agent.name": "helper"})
    first = span(
        "llm",
        root,
        scope="my-sdk",
        input=json.dumps(
            {
                "model": "m-1",
                "messages": [{"role": "system", "content": "Brief."}, {"role": "user", "content": "Find x"}],
            }
        ),
        output=json.dumps({"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [CALL]}}]}),
        model="m-1",
    )
    tool = span("lookup", root, scope="my-sdk", tool_name="lookup", input='{"q": "x"}', output="found")
    second = span(
        "llm",
        root,
        scope="my-sdk",
        **{
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "Find x",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "x is found",
        },
    )
    ex = extract_runs([root, first, tool, second])
    [run] = ex.runs
    assert (run.agent_name, run.convention, run.model) == ("helper", "generic", "m-1")
    assert texts(run.input_messages) == [("user", "Find x")]
    assert [m.content for m in run.system_messages] == ["Brief."]
    assert run.output[-1].content == "x is found"
    [tc] = run.tool_calls
    assert (tc.id, tc.name, tc.arguments, tc.result) == ("c1", "lookup", {"q": "x"}, "found")


def test_a_message_list_without_a_model_or_an_answer_is_no_model_call() -> None:
    only = span("handler", scope="web", input=json.dumps([{"role": "user", "content": "hi"}]))
    ex = extract_runs([only])
    assert ex.runs == []
    assert ex.unmatched_reason is not None and "generic: no span reads as a model call" in ex.unmatched_reason


def test_an_unknown_trace_says_what_it_carried() -> None:
    spans = [
        span("GET /health", scope="opentelemetry.instrumentation.flask", **{"http.method": "GET", "http.route": "/"})
    ]
    reason = extract_runs(spans).unmatched_reason
    assert reason == (
        "no known agent/GenAI convention in 1 span(s) "
        "(scopes: opentelemetry.instrumentation.flask; attribute namespaces: http)"
    )
