"""Mastra parity: the semantics issue 12 lists, each driven through the real pipeline (judge
steps over real HTTP to the fake OpenAI server)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import BaseModel
from support.agent_runs import MODEL

from tests.fakes import FakeOpenAI, Reply
from tracescorer import (
    Judge,
    PromptStep,
    ScorerRun,
    ScorerRunError,
    StreamErrorRetryProcessor,
    create_scorer,
    not_scorable,
    run_evals,
)
from tracescorer.model import Message
from tracescorer.prebuilt import create_includes_check, create_multi_turn_judge_scorer
from tracescorer.scorers import JudgeOutputError, ScorerConfigError
from tracescorer.scorers.agent_io import AgentInput
from tracescorer.scorers.retry import error_chain


class Verdict(BaseModel):
    label: str
    confidence: float


def judge(opts: dict[str, Any], **kw: Any) -> Judge:
    return Judge(model=MODEL, instructions="Grade.", **opts, **kw)


def verdict_scorer(opts: dict[str, Any], **kw: Any) -> Any:
    return (
        create_scorer(id="v", judge=judge(opts, **kw))
        .analyze(
            PromptStep(
                description="label", output_schema=Verdict, create_prompt=lambda *, run, results: f"LABEL {run.output}"
            )
        )
        .generate_score(lambda *, run, results: results.analyze_step_result.confidence)
    )


# -- 1. structured-output fallback ----------------------------------------------------------------
async def test_unparseable_native_reply_falls_back_to_the_schema_in_the_prompt(
    fake: FakeOpenAI, judge_opts: dict[str, Any]
) -> None:
    fake.script(
        "LABEL",
        [Reply.text("Sure! The label is good, confidence high."), Reply.json({"label": "good", "confidence": 0.9})],
    )
    result = await verdict_scorer(judge_opts).run(ScorerRun(output="answer"))
    assert result.status == "ok" and result.score == 0.9
    assert result.analyze_step_result == Verdict(label="good", confidence=0.9)
    first, second = fake.requests
    assert first.response_format["type"] == "json_schema"  # native structured output first
    assert second.response_format is None and "response_format" not in second.body
    assert "JSON schema" in second.prompt_text and '"confidence"' in second.prompt_text
    # both calls recorded: the failed native one and the prompt-injected one
    native, injected = result.judge_calls
    assert (native.status, native.structured_output) == ("error", "native")
    assert native.raw_output == "Sure! The label is good, confidence high."
    assert native.error_type == "JudgeOutputError"
    assert (injected.status, injected.structured_output) == ("ok", "prompt")
    assert injected.output == {"label": "good", "confidence": 0.9}
    assert result.judge_attempts == 2
    assert result.analyze_prompt == "LABEL answer"  # the step's prompt, not the schema text


async def test_schema_mismatch_also_falls_back(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script(
        "LABEL",
        [
            Reply.json({"label": "good"}),  # valid JSON, confidence missing
            Reply.json({"label": "good", "confidence": 0.4}),
        ],
    )
    result = await verdict_scorer(judge_opts).run(ScorerRun(output="a"))
    assert result.score == 0.4 and [c.status for c in result.judge_calls] == ["error", "ok"]


async def test_exhausted_fallback_is_one_failed_run_with_both_attempts(
    fake: FakeOpenAI, judge_opts: dict[str, Any]
) -> None:
    fake.script("LABEL", [Reply.text("no json here"), Reply.text("still {not json")])
    with pytest.raises(ScorerRunError) as info:
        await verdict_scorer(judge_opts).run(ScorerRun(output="a"))
    err = info.value
    assert err.failed_step == "analyze" and isinstance(err.__cause__, JudgeOutputError)
    calls = err.result.judge_calls
    assert [(c.status, c.structured_output) for c in calls] == [("error", "native"), ("error", "prompt")]
    assert [c.raw_output for c in calls] == ["no json here", "still {not json"]
    assert err.result.status == "error" and err.result.analyze_prompt == "LABEL a"
    assert fake.attempts("LABEL") == 2


@pytest.mark.parametrize(("mode", "structured"), [(False, "native"), (True, "prompt")])
async def test_explicit_modes_make_one_call(
    fake: FakeOpenAI, judge_opts: dict[str, Any], mode: bool, structured: str
) -> None:
    fake.script("LABEL", [Reply.text("not json"), Reply.json({"label": "x", "confidence": 1})])
    with pytest.raises(ScorerRunError) as info:
        await verdict_scorer(judge_opts, json_prompt_injection=mode).run(ScorerRun(output="a"))
    assert fake.attempts("LABEL") == 1
    assert [c.structured_output for c in info.value.result.judge_calls] == [structured]


async def test_output_processor_failure_does_not_fall_back(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    class Broken:
        def process_output(self, text: str) -> str:
            raise RuntimeError("moderation service down")

    fake.script("LABEL", Reply.json({"label": "x", "confidence": 1}))
    with pytest.raises(ScorerRunError) as info:
        await verdict_scorer(judge_opts, output_processors=[Broken()]).run(ScorerRun(output="a"))
    assert "moderation service down" in str(info.value) and fake.attempts("LABEL") == 1


def test_bad_json_mode_is_refused() -> None:
    with pytest.raises(ScorerConfigError, match="json_prompt_injection"):
        Judge(model="m", json_prompt_injection="sometimes")  # type: ignore[arg-type]


# -- 2. run() accepts a plain mapping -------------------------------------------------------------
async def test_run_accepts_a_mapping_with_python_field_names(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    seen: list[ScorerRun[Any, Any]] = []

    def score(*, run: ScorerRun[Any, Any], results: Any) -> float:
        seen.append(run)
        return 1.0

    plain = create_scorer(id="plain").generate_score(score)
    result = await plain.run(
        {"input": "q", "output": "a", "ground_truth": "g", "request_context": {"user": "u"}, "run_id": "r-1"}
    )
    assert result.run_id == "r-1" and result.score == 1.0
    assert (seen[0].input, seen[0].output, seen[0].ground_truth) == ("q", "a", "g")
    assert seen[0].request_context == {"user": "u"}

    fake.script("Criterion:", Reply.json({"satisfied": True, "reasoning": "forecast given"}))
    judge_scorer = create_multi_turn_judge_scorer(model=MODEL, criterion="Gives a forecast", **judge_opts)
    result = await judge_scorer.run(
        {
            "input": {"input_messages": [{"role": "user", "content": "Weather in Paris?"}]},
            "output": [
                {"role": "assistant", "content": [{"type": "text", "text": "Sunny, 21C."}]},
                {
                    "role": "assistant",
                    "content": {
                        "format": 2,
                        "parts": [
                            {
                                "type": "tool-invocation",
                                "toolInvocation": {
                                    "toolCallId": "c1",
                                    "toolName": "weather",
                                    "args": {"city": "Paris"},
                                    "result": {"t": 21},
                                    "state": "result",
                                },
                            },
                            {"type": "text", "text": "Tomorrow rain."},
                        ],
                    },
                },
            ],
        }
    )
    assert result.score == 1.0
    run = result.run
    assert run is not None and isinstance(run.input, AgentInput)
    assert all(isinstance(m, Message) for m in run.output)
    assert run.output[1].tool_calls[0].name == "weather"
    prompt = fake.requests[0].prompt_text
    assert "[1] Assistant: Sunny, 21C." in prompt and "[2] Assistant: Tomorrow rain." in prompt


async def test_mapping_errors_name_the_problem() -> None:
    scorer = create_scorer(id="s").generate_score(lambda *, run, results: 1)
    with pytest.raises(TypeError, match="'groundTruth' -> 'ground_truth'"):
        await scorer.run({"output": "a", "groundTruth": "g"})
    with pytest.raises(TypeError, match="needs 'output'"):
        await scorer.run({"input": "q"})
    with pytest.raises(TypeError, match="a mapping"):
        await scorer.run(42)  # type: ignore[arg-type]


# -- 4. run_evals validation and thresholds -------------------------------------------------------
async def _echo(messages: list[Message]) -> str:
    return f"echo {messages[-1].content}"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"data": []}, "data is empty"),
        ({"data": [{"inputs": []}]}, "'inputs' is empty"),
        ({"data": [{"inputs": "not a list"}]}, "must be a list"),
        ({"data": [{"text": "x"}]}, "needs 'input' or 'inputs'"),
        ({"scorers": []}, "scorers is empty"),
        ({"scorers": [{"scorer": create_includes_check("a"), "threshold": 1.5}]}, "0..1"),
        ({"scorers": [{"scorer": create_includes_check("a"), "threshold": -0.1}]}, "0..1"),
        ({"scorers": [{"scorer": create_includes_check("a"), "threshold": math.nan}]}, "0..1"),
        ({"scorers": [{"scorer": create_includes_check("a"), "threshold": {"min": 0.8, "max": 0.2}}]}, "above max"),
        ({"scorers": [{"scorer": create_includes_check("a"), "threshold": {"low": 0.2}}]}, "unknown keys"),
        ({"scorers": [{"scorer": create_includes_check("a"), "threshold": "high"}]}, "a number"),
    ],
)
async def test_run_evals_rejects_bad_input_before_running(kwargs: dict[str, Any], message: str) -> None:
    calls: list[Any] = []

    def target(messages: list[Message]) -> str:
        calls.append(messages)
        return "x"

    args: dict[str, Any] = {
        "data": [{"input": "q"}],
        "target": target,
        "scorers": [create_includes_check("x")],
        **kwargs,
    }
    with pytest.raises(ValueError, match=message):
        await run_evals(**args)
    assert calls == []  # validated before any target call


async def test_thresholds_are_numbers_or_ranges_checked_against_the_average() -> None:
    data = [{"input": "apple"}, {"input": "pear"}, {"input": "apple pie"}, {"input": "plum"}]
    apple = create_includes_check("apple")  # scores 1, 0, 1, 0: average 0.5
    result = await run_evals(
        data=data,
        target=_echo,
        scorers=[
            {"scorer": apple, "threshold": 0.5},
            {"scorer": create_includes_check("apple", id="in-range"), "threshold": {"min": 0.4, "max": 0.6}},
            {"scorer": create_includes_check("apple", id="too-high"), "threshold": {"max": 0.3}},
            {"scorer": create_includes_check("apple", id="too-low"), "threshold": {"min": 0.75}},
        ],
    )
    s = result.scorers
    assert s["includes-check"].average == 0.5 and s["includes-check"].passed is True
    assert s["in-range"].passed is True and s["too-high"].passed is False
    assert s["too-low"].passed is False and not result.passed
    # per item: each score against the same range
    assert [item.passed["in-range"] for item in result.items] == [False] * 4
    assert [item.passed["includes-check"] for item in result.items] == [True, False, True, False]


# -- 6. the retry processor walks the cause chain -------------------------------------------------
async def test_wrapped_retryable_error_still_retries(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    retry = StreamErrorRetryProcessor(max_retries=2)

    class WrappingRetry:
        # a processor that hands the stock one the provider error wrapped twice, as a caller's
        # own error handling would
        def process_api_error(self, *, error: BaseException, retry_count: int) -> Any:
            try:
                try:
                    raise RuntimeError("judge request failed") from error
                except RuntimeError:
                    raise ValueError("scoring step failed")  # __context__ = inner
            except ValueError as outer:
                return retry.process_api_error(error=outer, retry_count=retry_count)

    fake.script("GRADE", [Reply.rate_limited(retry_after_s=0), Reply.server_error(503), Reply.json({"score": 1})])
    scorer = create_scorer(
        id="w", judge=judge(judge_opts, error_processors=[WrappingRetry()], max_processor_retries=2)
    ).generate_score(PromptStep(description="s", create_prompt=lambda *, run, results: "GRADE"))
    result = await scorer.run(ScorerRun(output="x"))
    assert result.score == 1.0 and result.judge_calls[0].attempts == 3


def test_error_chain_and_classification_through_wrappers() -> None:
    class RateLimitError(Exception):
        status_code = 429

    class AuthenticationError(Exception):
        status_code = 401

    def wrapped(inner: BaseException) -> BaseException:
        try:
            try:
                raise inner
            except Exception as exc:
                raise RuntimeError("wrapped") from exc
        except RuntimeError as outer:
            return outer

    proc = StreamErrorRetryProcessor(max_retries=1)
    assert proc.should_retry(wrapped(RateLimitError("slow down")))
    assert not proc.should_retry(wrapped(AuthenticationError("bad key")))
    assert not proc.should_retry(RuntimeError("unknown"))
    assert StreamErrorRetryProcessor(retry_unknown_errors=True).should_retry(RuntimeError("?"))
    # a cycle in the chain terminates
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__cause__, b.__cause__ = b, a
    assert error_chain(a) == [a, b]


# -- 7. partial results keep the score -------------------------------------------------------------
async def test_failed_reason_keeps_the_score_in_the_partial_result(
    fake: FakeOpenAI, judge_opts: dict[str, Any]
) -> None:
    fake.script("SCORE", Reply.json({"score": 0.7}))
    fake.script("EXPLAIN", Reply.unauthorized())
    scorer = (
        create_scorer(id="p", judge=judge(judge_opts))
        .generate_score(PromptStep(description="s", create_prompt=lambda *, run, results: "SCORE"))
        .generate_reason(PromptStep(description="r", create_prompt=lambda *, run, results, score: f"EXPLAIN {score}"))
    )
    with pytest.raises(ScorerRunError) as info:
        await scorer.run(ScorerRun(output="x"))
    partial = info.value.result
    assert info.value.failed_step == "generate_reason"
    assert info.value.completed_steps == ("generate_score",)
    assert partial.status == "error" and partial.score == 0.7 and partial.reason is None
    assert partial.generate_reason_prompt == "EXPLAIN 0.7"
    assert [c.status for c in partial.judge_calls] == ["ok", "error"]


async def test_a_failed_score_step_leaves_no_score() -> None:
    def boom(*, run: Any, results: Any) -> float:
        raise RuntimeError("no")

    with pytest.raises(ScorerRunError) as info:
        await create_scorer(id="b").generate_score(boom).run(ScorerRun(output="x"))
    assert info.value.result.score is None


# -- 8. scale and not_scorable ---------------------------------------------------------------------
@pytest.mark.parametrize("scale", [math.nan, math.inf, -math.inf, 0, -1, True, "1"])
def test_non_finite_or_non_positive_scale_is_rejected_at_build(scale: Any) -> None:
    with pytest.raises(ValueError, match="scale"):
        create_multi_turn_judge_scorer(model=MODEL, criterion="c", scale=scale)
    with pytest.raises(ValueError, match="scale"):
        create_includes_check("x", scale=scale)


async def test_not_scorable_reason_is_optional() -> None:
    scorer = create_scorer(id="n").generate_score(lambda *, run, results: not_scorable())
    result = await scorer.run(ScorerRun(output="x"))
    assert result.status == "not_scorable" and result.reason is None and result.score is None
