"""Fallback judge models against real local fake servers: a transient failure of the model hands
the request to the next model (with the options of its own, here another endpoint), each model with
its own retries; the call records the model that answered and every attempt; a permanent failure
is not handed on; when every model fails the error names the last."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes import FakeOpenAI, Reply
from tracescorer import Judge, PromptStep, ScorerRunError, create_scorer
from tracescorer.scorers.retry import retry_options

VERDICT = Reply.json({"score": 0.75})


@pytest.fixture
def backup() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default=VERDICT) as server:
        yield server


def _scorer(fake: FakeOpenAI, backup: FakeOpenAI, **judge: Any) -> Any:
    routed = Judge(
        model="openai/gpt-4o-mini",
        api_base=fake.base_url,
        api_key="sk-test",
        fallbacks=[{"model": "openai/gpt-4.1-mini", "api_base": backup.base_url}],
        **judge,
    )
    step = PromptStep(description="grade", create_prompt=lambda *, run, results: f"Grade: {run.output}")
    return create_scorer(id="graded", judge=routed).generate_score(step)


async def test_a_transient_failure_hands_the_request_to_the_fallback(fake: FakeOpenAI, backup: FakeOpenAI) -> None:
    fake.script("Grade:", Reply.server_error(503))
    result = await _scorer(fake, backup, **retry_options(1, initial_s=0.01)).run({"output": "fine"})
    assert result.score == 0.75
    [call] = result.judge_calls
    assert call.model == "openai/gpt-4.1-mini" and call.status == "ok"
    assert call.attempts == 3  # the primary's attempt and its retry, then the fallback's
    assert call.cost_usd is not None and call.cost_usd > 0  # priced as the model that answered
    assert fake.attempts("Grade:") == 2 and backup.attempts("Grade:") == 1
    assert backup.requests[0].body["model"] == "gpt-4.1-mini"


async def test_a_permanent_failure_is_not_handed_on(fake: FakeOpenAI, backup: FakeOpenAI) -> None:
    fake.script("Grade:", Reply.unauthorized())
    with pytest.raises(ScorerRunError) as raised:
        await _scorer(fake, backup).run({"output": "fine"})
    [call] = raised.value.result.judge_calls
    assert call.model == "openai/gpt-4o-mini" and call.error_type == "AuthenticationError"
    assert backup.attempts() == 0


async def test_when_every_model_fails_the_error_names_the_last(fake: FakeOpenAI, backup: FakeOpenAI) -> None:
    fake.script("Grade:", Reply.rate_limited())
    backup.script("Grade:", Reply.server_error(502))
    with pytest.raises(ScorerRunError, match="failed after 2 attempt") as raised:
        await _scorer(fake, backup).run({"output": "fine"})
    [call] = raised.value.result.judge_calls
    assert call.model == "openai/gpt-4.1-mini" and call.attempts == 2 and call.status == "error"
