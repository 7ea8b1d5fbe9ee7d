"""run_evals: single and multi-turn items, thresholds, scorer errors."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.agent_runs import MODEL

from tests.fakes import FakeOpenAI, Reply
from tracescorer import ScorerRun, create_scorer, not_scorable, run_evals
from tracescorer.model import Message
from tracescorer.prebuilt import create_includes_check, create_multi_turn_judge_scorer
from tracescorer.scorers.evals import Threshold


async def echo_agent(messages: list[Message]) -> str:
    await asyncio.sleep(0)
    return f"echo {messages[-1].content} (turn {sum(m.role == 'user' for m in messages)})"


async def test_single_turn_with_threshold() -> None:
    seen: list[list[str]] = []

    def target(messages: list[Message]) -> dict[str, str]:  # sync target returning a dict
        seen.append([m.content for m in messages])
        return {"role": "assistant", "content": "Paris" if "France" in messages[-1].content else "no idea"}

    result = await run_evals(
        data=[{"input": "Capital of France?"}, {"input": "Capital of Peru?"}],
        target=target,
        scorers=[
            {"scorer": create_includes_check("Paris"), "threshold": 0.5},
            create_includes_check("idea", id="says-no-idea"),
        ],
    )
    assert seen == [["Capital of France?"], ["Capital of Peru?"]]
    summary = result.scorers["includes-check"]
    assert summary.average == 0.5 and summary.threshold == Threshold(min=0.5)
    assert summary.passed is True
    assert summary.scored == 2 and summary.errors == 0
    assert result.items[0].passed == {"includes-check": True}
    assert result.items[1].passed == {"includes-check": False}
    assert result.scorers["says-no-idea"].average == 0.5
    assert result.passed
    with pytest.raises(ValueError, match="duplicates"):
        await run_evals(
            data=[{"input": "x"}], target=target, scorers=[create_includes_check("a"), create_includes_check("b")]
        )


async def test_multi_turn_history_and_accumulated_output() -> None:
    captured: list[ScorerRun[Any, Any]] = []

    def score(*, run: ScorerRun[Any, Any], results: Any) -> float:
        captured.append(run)
        return float(len(run.output))

    counter = create_scorer(id="turns").generate_score(lambda *, run, results: score(run=run, results=results) / 4)
    histories: list[list[str]] = []

    async def target(messages: list[Message]) -> str:
        histories.append([f"{m.role}:{m.content}" for m in messages])
        return await echo_agent(messages)

    result = await run_evals(
        data=[{"inputs": ["a", "b", "c"]}], target=target, scorers=[{"scorer": counter, "threshold": 1}]
    )
    assert histories == [
        ["user:a"],
        ["user:a", "assistant:echo a (turn 1)", "user:b"],
        ["user:a", "assistant:echo a (turn 1)", "user:b", "assistant:echo b (turn 2)", "user:c"],
    ]
    run = captured[0]
    assert [m.content for m in run.output] == ["echo a (turn 1)", "echo b (turn 2)", "echo c (turn 3)"]
    assert [m.content for m in run.input.input_messages] == ["a", "b", "c"]
    assert result.scorers["turns"].average == 0.75 and result.scorers["turns"].passed is False
    assert not result.passed


async def test_multi_turn_judge_with_run_evals(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("echo London", Reply.json({"satisfied": True, "reasoning": "all cities"}))
    fake.script("echo Oslo", Reply.json({"satisfied": False, "reasoning": "missing"}))
    judge = create_multi_turn_judge_scorer(model=MODEL, criterion="Covers every city", **judge_opts)
    result = await run_evals(
        data=[{"inputs": ["London", "Paris"]}, {"inputs": ["Oslo"]}],
        target=echo_agent,
        scorers=[{"scorer": judge, "threshold": 1}],
        concurrency=2,
    )
    scores = [item.results["multi-turn-judge-scorer"].score for item in result.items]
    assert scores == [1.0, 0.0]
    summary = result.scorers["multi-turn-judge-scorer"]
    assert summary.average == 0.5 and summary.passed is False
    prompt = next(r for r in fake.requests if "echo London" in r.prompt_text).prompt_text
    assert "[1] Assistant: echo London (turn 1)" in prompt
    assert "[2] Assistant: echo Paris (turn 2)" in prompt


async def test_errors_and_not_scorable_are_counted() -> None:
    def boom(*, run: Any, results: Any) -> float:
        raise RuntimeError("nope")

    broken = create_scorer(id="broken").generate_score(boom)
    skip = create_scorer(id="skip").generate_score(lambda *, run, results: not_scorable("x"))
    result = await run_evals(
        data=[{"input": "q"}], target=echo_agent, scorers=[{"scorer": broken, "threshold": 1}, skip]
    )
    assert "nope" in result.items[0].errors["broken"]
    assert result.scorers["broken"].errors == 1 and result.scorers["broken"].average is None
    assert result.scorers["broken"].passed is False
    assert result.scorers["skip"].not_scorable == 1 and result.scorers["skip"].passed is None


async def test_concurrency_is_bounded() -> None:
    active, peak = 0, 0
    gate = asyncio.Event()

    async def target(messages: list[Message]) -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        if peak >= 3:
            gate.set()
        await asyncio.wait_for(gate.wait(), timeout=5)
        active -= 1
        return "ok"

    await run_evals(
        data=[{"input": str(i)} for i in range(9)], target=target, scorers=[create_includes_check("ok")], concurrency=3
    )
    assert peak == 3


async def test_bad_items_rejected() -> None:
    with pytest.raises(ValueError):
        await run_evals(data=[{"question": "x"}], target=echo_agent, scorers=[])
    with pytest.raises(ValueError):
        await run_evals(data=[], target=echo_agent, scorers=[], concurrency=0)
