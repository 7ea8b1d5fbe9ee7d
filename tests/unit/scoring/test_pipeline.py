"""create_scorer with function steps: order, arguments, sync/async, results and failures."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.agent_runs import make_run, text_message

from tracescorer import (
    ScorerRun,
    ScorerRunError,
    create_scorer,
    not_scorable,
)
from tracescorer.model import Conversation
from tracescorer.scorers import AgentInput, ScorerConfigError, StepResults


async def test_function_steps_run_in_order_with_results() -> None:
    seen: list[tuple[str, Any]] = []

    def preprocess(*, run: ScorerRun[Any, Any], results: StepResults) -> dict[str, int]:
        seen.append(("preprocess", results))
        return {"length": len(run.output)}

    async def analyze(*, run: ScorerRun[Any, Any], results: StepResults) -> str:
        await asyncio.sleep(0)
        seen.append(("analyze", results.preprocess_step_result))
        return "long" if results.preprocess_step_result["length"] > 3 else "short"

    def score(*, run: ScorerRun[Any, Any], results: StepResults) -> float:
        return 1.0 if results.analyze_step_result == "long" else 0.25

    async def reason(*, run: ScorerRun[Any, Any], results: StepResults, score: float) -> str:
        return f"{results.analyze_step_result} -> {score} ({results.generate_score_step_result})"

    # steps given out of order still run preprocess -> analyze -> score -> reason
    scorer = (
        create_scorer(id="len", description="length")
        .generate_reason(reason)
        .generate_score(score)
        .analyze(analyze)
        .preprocess(preprocess)
    )
    assert scorer.name == "len"
    assert scorer.steps == ("preprocess", "analyze", "generate_score", "generate_reason")
    result = await scorer.run(ScorerRun(input="q", output="ab"))
    assert result.status == "ok"
    assert result.score == 0.25
    assert result.reason == "short -> 0.25 (0.25)"
    assert result.preprocess_step_result == {"length": 2}
    assert result.analyze_step_result == "short"
    assert result.run_id  # generated
    assert result.judge_calls == ()
    assert result.generate_score_prompt is None
    assert seen[0] == ("preprocess", StepResults())
    assert seen[1] == ("analyze", {"length": 2})


async def test_run_id_kept_and_generated_ids_unique() -> None:
    scorer = create_scorer(id="x").generate_score(lambda *, run, results: 1)
    assert (await scorer.run(ScorerRun(output="o", run_id="r-7"))).run_id == "r-7"
    a = await scorer.run(ScorerRun(output="o"))
    b = await scorer.run(ScorerRun(output="o"))
    assert a.run_id != b.run_id


def test_missing_id_is_an_error_at_creation() -> None:
    with pytest.raises(ScorerConfigError):
        create_scorer(id="", description="d")
    with pytest.raises(TypeError):
        create_scorer(description="d")  # type: ignore[call-arg]


async def test_missing_generate_score_is_a_clear_error_at_run_time() -> None:
    scorer = create_scorer(id="no-score").preprocess(lambda *, run, results: 1)
    with pytest.raises(ScorerRunError, match="no generate_score step") as info:
        await scorer.run(ScorerRun(output="x"))
    assert info.value.failed_step == "generate_score"


def test_duplicate_step_and_bad_step_rejected() -> None:
    scorer = create_scorer(id="d").generate_score(lambda *, run, results: 1)
    with pytest.raises(ScorerConfigError):
        scorer.generate_score(lambda *, run, results: 2)
    with pytest.raises(ScorerConfigError):
        create_scorer(id="d").analyze("not a step")  # type: ignore[arg-type]


def test_builder_is_immutable() -> None:
    base = create_scorer(id="b").preprocess(lambda *, run, results: 1)
    full = base.generate_score(lambda *, run, results: 1)
    assert base.steps == ("preprocess",)
    assert full.steps == ("preprocess", "generate_score")


async def test_failing_step_raises_scorer_run_error_with_partial_result() -> None:
    def analyze(*, run: Any, results: Any) -> Any:
        raise RuntimeError("boom")

    scorer = (
        create_scorer(id="f")
        .preprocess(lambda *, run, results: "pre")
        .analyze(analyze)
        .generate_score(lambda *, run, results: 1)
    )
    with pytest.raises(ScorerRunError) as info:
        await scorer.run(ScorerRun(output="x", run_id="r"))
    err = info.value
    assert err.failed_step == "analyze"
    assert err.completed_steps == ("preprocess",)
    assert err.steps == ("preprocess", "analyze", "generate_score")
    assert isinstance(err.__cause__, RuntimeError)
    assert err.result.status == "error"
    assert err.result.preprocess_step_result == "pre"
    assert err.result.score is None
    assert "boom" in (err.result.error or "")


@pytest.mark.parametrize("bad", ["1", True, float("nan"), None])
async def test_score_must_be_a_finite_number(bad: Any) -> None:
    scorer = create_scorer(id="s").generate_score(lambda *, run, results: bad)
    with pytest.raises(ScorerRunError) as info:
        await scorer.run(ScorerRun(output="x"))
    assert info.value.failed_step == "generate_score"


async def test_not_scorable_stops_without_score() -> None:
    called: list[str] = []

    def score(*, run: Any, results: Any) -> float:
        called.append("score")
        return 1.0

    scorer = create_scorer(id="ns").preprocess(lambda *, run, results: not_scorable("no text")).generate_score(score)
    result = await scorer.run(ScorerRun(output=""))
    assert result.status == "not_scorable"
    assert result.score is None
    assert result.reason == "no text"
    assert called == []


async def test_prepare_run_sync_and_async() -> None:
    async def prepare(run: ScorerRun[Any, Any]) -> ScorerRun[Any, Any]:
        return ScorerRun(input=run.input, output=str(run.output).upper())

    scorer = create_scorer(id="p", prepare_run=prepare).generate_score(
        lambda *, run, results: 1.0 if run.output == "ABC" else 0.0
    )
    result = await scorer.run(ScorerRun(output="abc", run_id="keep-me"))
    assert result.score == 1.0 and result.run_id == "keep-me"
    assert result.run is not None and result.run.output == "ABC"

    bad = create_scorer(id="p2", prepare_run=lambda run: "nope").generate_score(  # type: ignore[arg-type,return-value]
        lambda *, run, results: 1
    )
    with pytest.raises(ScorerRunError) as info:
        await bad.run(ScorerRun(output="abc"))
    assert info.value.failed_step == "prepare_run"


def test_run_sync() -> None:
    scorer = create_scorer(id="sync").generate_score(lambda *, run, results: 0.5)
    assert scorer.run_sync(ScorerRun(output="x")).score == 0.5


async def test_run_sync_inside_loop_is_refused() -> None:
    scorer = create_scorer(id="sync").generate_score(lambda *, run, results: 0.5)
    with pytest.raises(RuntimeError, match="running event loop"):
        scorer.run_sync(ScorerRun(output="x"))


async def test_agent_type_accepts_agent_run_and_conversation() -> None:
    def score(*, run: ScorerRun[AgentInput, Any], results: Any) -> float:
        assert isinstance(run.input, AgentInput)
        return float(len(run.input.input_messages) * 10 + len(run.output))

    scorer = create_scorer(id="agent", type="agent").generate_score(score)
    single = await scorer.run(make_run())
    assert single.score == 11 and single.run_id == "run-1"
    conv = Conversation(
        conversation_id="c1",
        runs=(
            make_run(run_id="a", user="one", output=(text_message("assistant", "1"),)),
            make_run(run_id="b", user="two", output=(text_message("assistant", "2"), text_message("assistant", "2b"))),
        ),
    )
    result = await scorer.run(conv)
    assert result.score == 23 and result.run_id == "c1"


def test_unknown_type_rejected() -> None:
    with pytest.raises(ScorerConfigError):
        create_scorer(id="t", type="workflow")


async def test_concurrent_runs_are_independent() -> None:
    async def score(*, run: Any, results: Any) -> float:
        await asyncio.sleep(0)
        return float(run.output)

    scorer = create_scorer(id="c").generate_score(score)
    results = await asyncio.gather(*(scorer.run(ScorerRun(output=str(i))) for i in range(50)))
    assert [r.score for r in results] == [float(i) for i in range(50)]
