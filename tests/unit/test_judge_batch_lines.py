"""Batch result lines as the judge sees them: a 200 line is litellm's response priced at the batch
rate (half gpt-4o-mini's live price, from litellm's price map), a line another request of the same
key was billed for costs nothing, an error line keeps its status for the heal classes."""

from __future__ import annotations

import pytest

from tracescorer.scorers import batching
from tracescorer.scorers.judge import _import_litellm
from tracescorer.scorers.retry import is_transient

BODY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-mini",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": '{"score": 1}'}}],
    "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100},
}


def _line(status: int, body: dict) -> dict:
    return {"custom_id": "k", "response": {"status_code": status, "body": body}, "error": None}


def test_an_answered_line_is_priced_at_the_batch_rate_and_a_shared_one_is_free() -> None:
    litellm = _import_litellm()
    reply = batching.response_of(litellm, "openai/gpt-4o-mini", _line(200, BODY))
    assert reply.choices[0].message.content == '{"score": 1}' and reply.usage.prompt_tokens == 1000
    live = 1000 * 0.15e-6 + 100 * 0.6e-6
    assert reply._hidden_params["response_cost"] == pytest.approx(live / 2)
    shared = batching.response_of(litellm, "openai/gpt-4o-mini", {**_line(200, BODY), batching.SHARED: True})
    assert shared._hidden_params["response_cost"] == 0.0


@pytest.mark.parametrize(("status", "transient"), [(503, True), (429, True), (400, False)])
def test_an_error_line_keeps_its_status_for_the_heal_classes(status: int, transient: bool) -> None:
    with pytest.raises(batching.BatchRequestError) as raised:
        batching.response_of(_import_litellm(), "openai/gpt-4o-mini", _line(status, {"error": {"message": "no"}}))
    assert raised.value.status_code == status and is_transient(raised.value) is transient


def test_a_request_line_sends_what_the_judge_asks_without_connection_options() -> None:
    litellm = _import_litellm()
    options = {"api_base": "http://x/v1", "api_key": "k", "timeout": 5, "num_retries": 0, "temperature": 0}
    line = batching.request_line(litellm, "key1", "openai/gpt-4o-mini", [{"role": "user", "content": "hi"}], options)
    assert line == {
        "custom_id": "key1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "temperature": 0},
    }
    assert batching.connection(options) == {"api_base": "http://x/v1", "api_key": "k", "timeout": 5}
