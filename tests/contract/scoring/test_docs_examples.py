"""The examples of docs/scorers.md, run against the fake server (keeps the docs honest)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from support.agent_runs import make_run

from tests.fakes import FakeOpenAI, Reply
from tracescorer import (
    Judge,
    PromptStep,
    RedactPII,
    RetryMatcher,
    ScorerRegistry,
    ScorerRun,
    StreamErrorRetryProcessor,
    create_scorer,
    filter_run,
    run_evals,
)
from tracescorer.prebuilt import create_multi_turn_judge_scorer, create_non_empty_response_check
from tracescorer.scorers import InMemoryScoreSink


async def test_code_scorer_example() -> None:
    def score(*, run: Any, results: Any) -> float:
        return 1.0 if len(run.output) < 500 else 0.0

    short_answers = (
        create_scorer(id="short-answer", description="Answers stay under 500 characters")
        .generate_score(score)
        .generate_reason(lambda *, run, results, score: f"{len(run.output)} characters")
    )
    result = await short_answers.run(ScorerRun(input="question", output="a short answer"))
    assert (result.score, result.reason, result.status) == (1.0, "14 characters", "ok")


class Claims(BaseModel):
    claims: list[str]


async def test_judge_example(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("List the claims", Reply.json({"claims": ["a", "b"]}))
    fake.script("How many of these claims", Reply.json({"supported": 1}))
    fake.script("Explain a grounding", Reply.text("Half of the claims are supported."))

    class Shorten:
        def process_input(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [{**m, "content": m["content"][:20_000]} for m in messages]

    retry = StreamErrorRetryProcessor(
        max_retries=2,
        max_retry_after_s=30,
        delay_s=lambda *, retry_count, error: min(1.0 * 2**retry_count, 30.0),
        matchers=[RetryMatcher(message=r"ECONNRESET|socket hang up")],
    )
    judge = Judge(
        model="openai/gpt-4o-mini",
        instructions="You are a strict fact checker.",
        temperature=0,
        input_processors=[RedactPII(), Shorten()],
        error_processors=[retry],
        max_processor_retries=2,
        **judge_opts,
    )
    grounded = (
        create_scorer(
            id="grounded",
            description="Claims backed by the docs",
            judge=judge,
            type="agent",
            prepare_run=filter_run(max_remembered_messages=20),
        )
        .preprocess(
            PromptStep(
                description="Extract claims",
                output_schema=Claims,
                create_prompt=lambda *, run, results: f"List the claims in:\n{run.output[-1].content}",
            )
        )
        .generate_score(
            PromptStep(
                description="Check claims",
                output_schema={
                    "type": "object",
                    "properties": {"supported": {"type": "integer"}},
                    "required": ["supported"],
                },
                create_prompt=lambda *, run, results: (
                    f"How many of these claims are supported? {results.preprocess_step_result.claims}"
                ),
                calculate_score=lambda *, run, results, output: (
                    output["supported"] / max(1, len(results.preprocess_step_result.claims))
                ),
            )
        )
        .generate_reason(
            PromptStep(
                description="Explain",
                create_prompt=lambda *, run, results, score: f"Explain a grounding score of {score}.",
            )
        )
    )
    result = await grounded.run(make_run())
    assert result.score == 0.5 and result.reason == "Half of the claims are supported."
    assert len(result.judge_calls) == 3 and result.judge_cost_usd is not None


async def test_evals_and_registry_example(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("Criterion:", Reply.json({"satisfied": True, "reasoning": "ok"}))

    async def agent(messages: list[Any]) -> str:
        return f"Forecast for {messages[-1].content}: sunny"

    report = await run_evals(
        data=[
            {"input": "What's the weather in London?"},
            {"inputs": ["I'm going to London and Paris.", "Weather in London?", "And Paris?"]},
        ],
        target=agent,
        scorers=[
            {
                "scorer": create_multi_turn_judge_scorer(
                    model="openai/gpt-4o-mini", criterion="Forecasts for every city asked", **judge_opts
                ),
                "threshold": 1,
            },
            create_non_empty_response_check(),
        ],
        concurrency=4,
    )
    assert report.scorers["multi-turn-judge-scorer"].average == 1.0 and report.passed
    assert report.items[0].results["non-empty-response-check"].score == 1.0

    registry = ScorerRegistry()
    registry.register(create_multi_turn_judge_scorer(model="openai/gpt-4o-mini", criterion="placeholder"))
    sink = InMemoryScoreSink()
    stored = await registry.persist(report.items[0].results["multi-turn-judge-scorer"], sink)
    assert stored and len(sink.scores) == 1
