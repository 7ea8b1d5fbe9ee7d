"""Prompt steps through litellm to the fake OpenAI server over real HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel
from support.agent_runs import MODEL

from tests.fakes import FakeOpenAI, Reply
from tracescorer import Judge, PromptStep, ScorerRun, ScorerRunError, create_scorer
from tracescorer.scorers import JudgeCallError, JudgeOutputError, ScorerConfigError


class Facts(BaseModel):
    facts: list[str]


def judge(opts: dict[str, Any], **kw: Any) -> Judge:
    return Judge(model=MODEL, instructions="You are a careful grader.", **opts, **kw)


async def test_full_prompt_pipeline(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script(
        "EXTRACT",
        Reply.json({"facts": ["sky is blue", "grass is green"]}, usage={"prompt_tokens": 100, "completion_tokens": 20}),
    )
    fake.script("CLASSIFY", Reply.json({"label": "ok", "n": 2}))
    fake.script("SCORE", Reply.json({"score": 0.75}))
    fake.script("EXPLAIN", Reply.text("Because two facts were correct."))
    schema = {
        "type": "object",
        "properties": {"label": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["label", "n"],
    }
    scorer = (
        create_scorer(id="facts", description="d", judge=judge(judge_opts))
        .preprocess(
            PromptStep(
                description="extract",
                output_schema=Facts,
                create_prompt=lambda *, run, results: f"EXTRACT {run.output}",
            )
        )
        .analyze(
            PromptStep(
                description="classify",
                output_schema=schema,
                create_prompt=lambda *, run, results: f"CLASSIFY {results.preprocess_step_result.facts}",
            )
        )
        .generate_score(PromptStep(description="score", create_prompt=lambda *, run, results: "SCORE it"))
        .generate_reason(PromptStep(description="why", create_prompt=lambda *, run, results, score: f"EXPLAIN {score}"))
    )
    result = await scorer.run(ScorerRun(input="q", output="The sky is blue."))
    assert result.status == "ok"
    assert result.preprocess_step_result == Facts(facts=["sky is blue", "grass is green"])
    assert result.analyze_step_result == {"label": "ok", "n": 2}
    assert result.score == 0.75
    assert result.reason == "Because two facts were correct."
    assert result.preprocess_prompt == "EXTRACT The sky is blue."
    assert result.analyze_prompt == "CLASSIFY ['sky is blue', 'grass is green']"
    assert result.generate_score_prompt == "SCORE it"
    assert result.generate_reason_prompt == "EXPLAIN 0.75"
    assert [c.step for c in result.judge_calls] == ["preprocess", "analyze", "generate_score", "generate_reason"]
    first = result.judge_calls[0]
    assert first.status == "ok" and first.attempts == 1 and first.model == MODEL
    assert first.input_tokens == 100 and first.output_tokens == 20
    assert first.cost_usd is None  # unknown model: no price, no crash
    assert first.duration_ms > 0
    assert json.loads(first.raw_output or "") == {"facts": ["sky is blue", "grass is green"]}
    assert first.output == {"facts": ["sky is blue", "grass is green"]}
    assert result.judge_attempts == 4 and (result.judge_input_tokens or 0) >= 100
    # native structured output: response_format with the schema, except for the text step
    reqs = fake.requests
    assert reqs[0].response_format["type"] == "json_schema"
    assert reqs[0].response_format["json_schema"]["schema"]["properties"]["facts"]["type"] == "array"
    assert reqs[1].response_format["json_schema"]["schema"] == schema
    assert reqs[2].response_format["json_schema"]["schema"]["required"] == ["score"]
    assert reqs[3].response_format is None
    assert reqs[0].messages[0] == {"role": "system", "content": "You are a careful grader."}
    assert reqs[0].headers["Authorization"] == "Bearer sk-test"
    assert reqs[0].path == "/v1/chat/completions"
    assert "num_retries" not in reqs[0].body


async def test_calculate_score_gets_judge_output(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("RATE", Reply.json({"good": 3, "bad": 1}))
    seen: dict[str, Any] = {}

    def calc(*, run: Any, results: Any, output: Any) -> float:
        seen["output"] = output
        return output["good"] / (output["good"] + output["bad"])

    scorer = create_scorer(id="c", judge=judge(judge_opts)).generate_score(
        PromptStep(
            description="rate",
            create_prompt=lambda *, run, results: "RATE",
            output_schema={"type": "object", "required": ["good", "bad"]},
            calculate_score=calc,
        )
    )
    result = await scorer.run(ScorerRun(output="x"))
    assert result.score == 0.75 and seen["output"] == {"good": 3, "bad": 1}


async def test_known_model_gets_a_cost(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("SCORE", Reply.json({"score": 1}, usage={"prompt_tokens": 1000, "completion_tokens": 100}))
    scorer = create_scorer(id="c", judge=Judge(model="openai/gpt-4o-mini", **judge_opts)).generate_score(
        PromptStep(description="s", create_prompt=lambda *, run, results: "SCORE")
    )
    result = await scorer.run(ScorerRun(output="x"))
    cost = result.judge_calls[0].cost_usd
    assert cost is not None and 0 < cost < 0.01
    assert result.judge_cost_usd == cost


async def test_json_prompt_injection_sends_no_response_format(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("GRADE", Reply.json({"score": 0.5}))  # no response_format: fenced JSON in text
    scorer = create_scorer(id="inj", judge=judge(judge_opts, json_prompt_injection=True)).generate_score(
        PromptStep(description="s", create_prompt=lambda *, run, results: "GRADE")
    )
    result = await scorer.run(ScorerRun(output="x"))
    assert result.score == 0.5
    req = fake.requests[0]
    assert "response_format" not in req.body
    assert "JSON schema" in req.prompt_text and '"score"' in req.prompt_text
    assert result.generate_score_prompt == "GRADE"  # the step's prompt, not the injected text
    assert (result.judge_calls[0].raw_output or "").startswith("Here is my verdict:\n```json")


async def test_injection_invalid_json_is_a_clear_error(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("GRADE", Reply.text("I think it deserves a 7/10."))
    scorer = create_scorer(id="inj", judge=judge(judge_opts, json_prompt_injection=True)).generate_score(
        PromptStep(description="s", create_prompt=lambda *, run, results: "GRADE")
    )
    with pytest.raises(ScorerRunError) as info:
        await scorer.run(ScorerRun(output="x"))
    cause = info.value.__cause__
    assert isinstance(cause, JudgeOutputError)
    assert "not valid JSON" in str(cause) and "7/10" in str(cause)
    call = info.value.result.judge_calls[-1]
    assert call.status == "error" and call.raw_output == "I think it deserves a 7/10."
    assert call.error_type == "JudgeOutputError"


async def test_schema_mismatch_is_an_output_error(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("EXTRACT", Reply.json({"facts": "not a list"}))
    scorer = (
        create_scorer(id="m", judge=judge(judge_opts))
        .analyze(PromptStep(description="e", output_schema=Facts, create_prompt=lambda *, run, results: "EXTRACT"))
        .generate_score(lambda *, run, results: 1)
    )
    with pytest.raises(ScorerRunError) as info:
        await scorer.run(ScorerRun(output="x"))
    assert info.value.failed_step == "analyze"
    assert isinstance(info.value.__cause__, JudgeOutputError)


async def test_step_judge_overrides_field_by_field(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("A", Reply.json({"score": 1}))
    base = Judge(model=MODEL, instructions="BASE INSTRUCTIONS", temperature=0.1, **judge_opts)
    step_judge = Judge(model="openai/other-judge", temperature=0.7)
    scorer = create_scorer(id="o", judge=base).generate_score(
        PromptStep(description="s", create_prompt=lambda *, run, results: "A", judge=step_judge)
    )
    result = await scorer.run(ScorerRun(output="x"))
    req = fake.requests[0]
    assert req.body["model"] == "other-judge"
    assert req.body["temperature"] == 0.7
    assert req.messages[0]["content"] == "BASE INSTRUCTIONS"  # inherited
    assert result.judge_calls[0].model == "openai/other-judge"


def test_judge_merge_semantics() -> None:
    from tracescorer import StreamErrorRetryProcessor

    p1, p2 = StreamErrorRetryProcessor(max_retries=1), StreamErrorRetryProcessor(max_retries=2)
    base = Judge(model="m", instructions="i", error_processors=[p1], max_processor_retries=3, api_base="http://x")
    merged = base.merged_with(Judge(error_processors=[p2]))
    assert merged.error_processors == (p2,)  # lists replace
    assert merged.max_processor_retries == 3  # inherited
    assert merged.model == "m" and merged.options["api_base"] == "http://x"
    assert base.merged_with(Judge(max_processor_retries=0)).retry_cap == 0
    assert Judge(model="m", error_processors=[p1]).retry_cap == 10
    assert Judge(model="m").retry_cap == 0
    with pytest.raises(AttributeError):
        base.model = "x"  # type: ignore[misc]
    assert "sk-secret" not in repr(Judge(model="m", api_key="sk-secret"))


def test_judge_refuses_litellm_retries() -> None:
    with pytest.raises(ScorerConfigError, match="StreamErrorRetryProcessor"):
        Judge(model="m", num_retries=3)
    with pytest.raises(ScorerConfigError):
        Judge(model="m", response_format={})


async def test_prompt_step_without_judge_is_config_error() -> None:
    scorer = create_scorer(id="nj").generate_score(
        PromptStep(description="s", create_prompt=lambda *, run, results: "x")
    )
    with pytest.raises(ScorerRunError) as info:
        await scorer.run(ScorerRun(output="x"))
    assert isinstance(info.value.__cause__, ScorerConfigError)


async def test_malformed_body_and_provider_errors_recorded(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("BAD", Reply.malformed())
    scorer = create_scorer(id="b", judge=judge(judge_opts)).generate_score(
        PromptStep(description="s", create_prompt=lambda *, run, results: "BAD")
    )
    with pytest.raises(ScorerRunError) as info:
        await scorer.run(ScorerRun(output="x"))
    assert isinstance(info.value.__cause__, JudgeCallError)
    call = info.value.result.judge_calls[-1]
    assert call.status == "error" and call.attempts == 1 and call.error


async def test_async_create_prompt_and_output_processor(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("ASYNC", Reply.text("  shouting reason  "))

    class Upper:
        async def process_output(self, text: str) -> str:
            return text.strip().upper()

    async def prompt(*, run: Any, results: Any, score: float) -> str:
        return f"ASYNC {score}"

    scorer = (
        create_scorer(id="a", judge=judge(judge_opts, output_processors=[Upper()]))
        .generate_score(lambda *, run, results: 1)
        .generate_reason(PromptStep(description="r", create_prompt=prompt))
    )
    result = await scorer.run(ScorerRun(output="x"))
    assert result.reason == "SHOUTING REASON"
