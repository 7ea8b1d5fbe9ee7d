"""Function steps are called without a coroutine per step: sync, async and awaitable-returning
steps give the same results, failures and not-scorable outcomes."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Generator
from typing import Any

import pytest

from tracescorer import ScorerRun, ScorerRunError, create_scorer, not_scorable
from tracescorer.scorers import StepResults
from tracescorer.scorers.scorer import Scorer
from tracescorer.scorers.types import ScorerResult

RUN = ScorerRun(input="q", output="a longer answer", run_id="run-1")


class Later:
    """An awaitable that is not a coroutine (what a sync function may hand back)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, None, Any]:
        yield from asyncio.sleep(0).__await__()
        return self.value


class Tagged(dict[str, Any]):
    """A dict subclass a step may return: not awaitable, returned as it is."""


def as_kind(kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as a sync step, an async step, or a sync step returning an awaitable."""
    if kind == "sync":
        return fn
    if kind == "async":

        async def step(**kwargs: Any) -> Any:
            await asyncio.sleep(0)
            return fn(**kwargs)

        return step

    def later(**kwargs: Any) -> Any:
        return Later(fn(**kwargs))

    return later


def build(kind: str, *, analyze: Callable[..., Any], score: Callable[..., Any]) -> Scorer[Any, Any]:
    return (
        create_scorer(id="steps", description="step kinds")
        .preprocess(as_kind(kind, lambda *, run, results: Tagged(length=len(run.output))))
        .analyze(as_kind(kind, analyze))
        .generate_score(as_kind(kind, score))
        .generate_reason(
            as_kind(kind, lambda *, run, results, score: f"{results.analyze_step_result} {score} {results!r}")
        )
    )


def comparable(result: ScorerResult) -> dict[str, Any]:
    fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    fields.pop("duration_ms")
    return fields


KINDS = ("sync", "async", "awaitable")


async def test_step_kinds_give_the_same_result() -> None:
    results = [
        await build(
            kind,
            analyze=lambda *, run, results: ["long" if results.preprocess_step_result["length"] > 3 else "short"],
            score=lambda *, run, results: 1 if results.analyze_step_result == ["long"] else 0.5,
        ).run(RUN)
        for kind in KINDS
    ]
    first = comparable(results[0])
    assert first["status"] == "ok" and first["score"] == 1.0 and type(first["score"]) is float
    assert type(first["preprocess_step_result"]) is Tagged
    assert first["reason"].startswith("['long'] 1.0 StepResults(preprocess_step_result={'length': 15}")
    assert all(comparable(r) == first for r in results[1:])


async def test_step_kinds_end_not_scorable_alike() -> None:
    results = [
        await build(
            kind, analyze=lambda *, run, results: not_scorable("nothing to grade"), score=lambda *, run, results: 1
        ).run(RUN)
        for kind in KINDS
    ]
    assert results[0].status == "not_scorable" and results[0].reason == "nothing to grade"
    assert results[0].score is None and results[0].preprocess_step_result == {"length": 15}
    assert all(comparable(r) == comparable(results[0]) for r in results[1:])


@pytest.mark.parametrize("bad", [True, "1", float("nan")])
async def test_step_kinds_fail_alike(bad: Any) -> None:
    failures = []
    for kind in KINDS:
        with pytest.raises(ScorerRunError) as caught:
            await build(kind, analyze=lambda *, run, results: "x", score=lambda *, run, results: bad).run(RUN)
        failures.append(caught.value)
    first = failures[0]
    assert first.failed_step == "generate_score"
    assert first.completed_steps == ("preprocess", "analyze")
    for other in failures[1:]:
        assert (other.failed_step, other.completed_steps, type(other.__cause__)) == (
            first.failed_step,
            first.completed_steps,
            type(first.__cause__),
        )
        assert comparable(other.result) == comparable(first.result)


async def test_every_step_gets_its_own_results() -> None:
    seen: list[StepResults] = []

    def record(value: Any) -> Callable[..., Any]:
        def step(*, run: ScorerRun[Any, Any], results: StepResults, **_: Any) -> Any:
            seen.append(results)
            return value

        return step

    scorer = (
        create_scorer(id="seen")
        .preprocess(record("p"))
        .analyze(record("a"))
        .generate_score(record(2))
        .generate_reason(record("r"))
    )
    result = await scorer.run(RUN)
    assert seen == [
        StepResults(),
        StepResults(preprocess_step_result="p"),
        StepResults(preprocess_step_result="p", analyze_step_result="a"),
        StepResults(preprocess_step_result="p", analyze_step_result="a", generate_score_step_result=2.0),
    ]
    assert len({id(r) for r in seen}) == 4  # a new one per step: the earlier ones never change
    assert (result.score, result.reason) == (2.0, "r")
