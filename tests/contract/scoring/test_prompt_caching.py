"""Provider prompt caching against real local fake providers: a judge request is laid out static
first (instructions and the schema asked for in the prompt before the run's content), the same
bytes for every run; Anthropic requests mark the static prefix ``cache_control``; the cached
input tokens the provider reports are recorded and priced as the provider bills them (litellm's
cache read and write rates, not the input price)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from pydantic import BaseModel

from tests.fakes import FakeOpenAI, Reply
from tests.fakes.fake_anthropic import FakeAnthropic
from tracescorer import Judge, PromptStep, create_scorer
from tracescorer.scorers.prebuilt import create_multi_turn_judge_scorer
from tracescorer.scorers.types import JudgeCall, ScorerRun

RUBRIC = "Grade the answer against the rubric. " + "A score of 1 means fully correct and grounded. " * 120
VERDICT = Reply.json({"score": 0.5})


class Grade(BaseModel):
    score: float


@pytest.fixture
def caching() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default=VERDICT, prompt_cache=True) as server:
        yield server


@pytest.fixture
def claude() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(default=VERDICT) as server:
        yield server


def _scorer(judge: Judge) -> Any:
    step = PromptStep(
        description="grade", create_prompt=lambda *, run, results: f"Answer: {run.output}", output_schema=Grade
    )
    return create_scorer(id="graded", judge=judge).generate_score(step)


def price(model: str, call: JudgeCall) -> float:
    """What the provider bills for the call's usage, from litellm's price table."""
    info = litellm.get_model_info(model)
    read, written = call.cached_tokens or 0, call.cache_write_tokens or 0
    assert call.input_tokens is not None and call.output_tokens is not None
    return (
        (call.input_tokens - read - written) * info["input_cost_per_token"]
        + read * (info["cache_read_input_token_cost"] or 0)
        + written * (info.get("cache_creation_input_token_cost") or 0)
        + call.output_tokens * info["output_cost_per_token"]
    )


async def test_openai_requests_lead_with_the_same_static_prefix_and_cached_tokens_are_priced(
    caching: FakeOpenAI,
) -> None:
    model = "openai/gpt-4o-mini"
    scorer = _scorer(Judge(model=model, instructions=RUBRIC, api_base=caching.base_url, api_key="k"))
    first = (await scorer.run({"output": "Paris"})).judge_calls[0]
    second = (await scorer.run({"output": "Lyon, the capital"})).judge_calls[0]
    a, b = caching.requests
    assert json.dumps(a.messages[0]) == json.dumps(b.messages[0])  # byte-identical static prefix
    assert a.messages[0] == {"role": "system", "content": RUBRIC}  # no marks: OpenAI caches by itself
    assert [m["role"] for m in b.messages] == ["system", "user"]
    assert b.messages[1]["content"] == "Answer: Lyon, the capital"  # the run's content last
    assert first.cached_tokens is None
    assert second.cached_tokens is not None and second.cached_tokens >= 1024
    assert second.input_tokens is not None and second.cached_tokens < second.input_tokens
    assert first.cost_usd == pytest.approx(price(model, first))
    assert second.cost_usd == pytest.approx(price(model, second))
    full = second.input_tokens * litellm.get_model_info(model)["input_cost_per_token"]
    assert second.cost_usd is not None and second.cost_usd < full  # cheaper than the input price


async def test_the_schema_asked_for_in_the_prompt_comes_before_the_run(caching: FakeOpenAI) -> None:
    judge = Judge(
        model="openai/gpt-4o-mini",
        instructions=RUBRIC,
        json_prompt_injection=True,
        api_base=caching.base_url,
        api_key="k",
    )
    await _scorer(judge).run({"output": "Paris"})
    await _scorer(judge).run({"output": "Rome"})
    a, b = caching.requests
    assert a.messages[0] == b.messages[0] and a.messages[0]["role"] == "system"
    assert a.messages[0]["content"].startswith(RUBRIC) and '"score"' in a.messages[0]["content"]
    assert (a.messages[-1]["content"], b.messages[-1]["content"]) == ("Answer: Paris", "Answer: Rome")


async def test_anthropic_requests_mark_the_static_prefix_and_pay_cache_rates(claude: FakeAnthropic) -> None:
    model = "anthropic/claude-haiku-4-5"
    scorer = _scorer(Judge(model=model, instructions=RUBRIC, api_base=claude.url, api_key="k"))
    first = (await scorer.run({"output": "Paris"})).judge_calls[0]
    second = (await scorer.run({"output": "Rome"})).judge_calls[0]
    a, b = claude.requests
    assert a.body["system"] == [{"type": "text", "text": RUBRIC, "cache_control": {"type": "ephemeral"}}]
    assert json.dumps(a.body["system"]) == json.dumps(b.body["system"])
    assert "cache_control" not in json.dumps(a.body["messages"])  # the run's content is not marked
    assert first.cache_write_tokens == len(RUBRIC) // 4 and first.cached_tokens is None
    assert second.cached_tokens == len(RUBRIC) // 4 and second.cache_write_tokens is None
    assert first.cost_usd == pytest.approx(price(model, first))  # the write at 1.25x the input price
    assert second.cost_usd == pytest.approx(price(model, second))  # the read at 0.1x
    assert second.cost_usd is not None and first.cost_usd is not None and second.cost_usd < first.cost_usd / 5


async def test_the_multi_turn_judge_puts_the_criterion_before_the_transcript(caching: FakeOpenAI) -> None:
    scorer = create_multi_turn_judge_scorer(
        model="openai/gpt-4o-mini", criterion="Polite", api_base=caching.base_url, api_key="k"
    )
    caching.script("Criterion:", Reply.json({"satisfied": True, "reasoning": "ok"}))
    for text in ("Hello there.", "Good morning!"):
        await scorer.run(ScorerRun(output=({"role": "assistant", "content": text},)))
    prompts = [r.messages[-1]["content"] for r in caching.requests]
    heads = [p[: p.index("<<<BEGIN_UNTRUSTED_TRANSCRIPT>>>")] for p in prompts]
    assert heads[0] == heads[1] and "Criterion: Polite" in heads[0] and "Answer with" in heads[0]
    assert prompts[0].endswith("<<<END_UNTRUSTED_TRANSCRIPT>>>")
