"""Deterministic prebuilt code scorers and quick checks."""

from __future__ import annotations

from typing import Any

import pytest
from support.agent_runs import make_run, text_message, tool_message

from tracescorer import ScorerRun
from tracescorer.model import Message, Part, ToolCall
from tracescorer.prebuilt import (
    create_called_tool_check,
    create_completeness_scorer,
    create_content_similarity_scorer,
    create_did_not_call_check,
    create_excludes_check,
    create_includes_check,
    create_keyword_coverage_scorer,
    create_matches_check,
    create_max_tool_calls_check,
    create_no_tool_errors_check,
    create_non_empty_response_check,
    create_textual_difference_scorer,
    create_tone_consistency_scorer,
    create_tool_call_accuracy_scorer,
)


def run_of(output: str, input: str = "", ground_truth: Any = None) -> ScorerRun[Any, Any]:
    return ScorerRun(input=input, output=output, ground_truth=ground_truth)


async def score(scorer: Any, run: Any) -> float:
    result = await scorer.run(run)
    assert result.status == "ok" and result.reason
    return float(result.score)


async def test_completeness() -> None:
    s = create_completeness_scorer()
    assert await score(s, run_of("Paris weather: sunny", "weather in Paris and London")) == pytest.approx(2 / 3)
    assert await score(s, run_of("anything", "the of and")) == 1.0
    result = await s.run(run_of("cats", "cats dogs"))
    assert result.analyze_step_result["missing"] == ["dogs"]
    assert await score(create_completeness_scorer(scale=10), run_of("dogs cats", "cats dogs")) == 10


async def test_keyword_coverage() -> None:
    s = create_keyword_coverage_scorer(keywords=["refund", "order number", "Sorry"])
    assert await score(s, run_of("Sorry! Your refund for order number 5 is on its way.")) == 1.0
    assert await score(s, run_of("Your refund is coming")) == pytest.approx(1 / 3)
    assert await score(s, run_of("refunded")) == 0.0  # word boundaries
    cs = create_keyword_coverage_scorer(keywords=["Sorry"], case_sensitive=True)
    assert await score(cs, run_of("sorry")) == 0.0
    from_input = create_keyword_coverage_scorer()
    assert await score(from_input, run_of("billing address", "update billing address")) == pytest.approx(2 / 3)


async def test_content_similarity_and_textual_difference() -> None:
    sim = create_content_similarity_scorer()
    assert await score(sim, run_of("Hello  World", "hello world")) == 1.0
    assert await score(create_content_similarity_scorer(ignore_case=False), run_of("HELLO", "hello")) == 0.0
    assert 0 < await score(sim, run_of("hello there", ground_truth="hello world")) < 1
    diff = create_textual_difference_scorer()
    result = await diff.run(run_of("abcdef", ground_truth="abcxef"))
    assert result.score == pytest.approx(5 / 6)
    assert result.analyze_step_result["changes"] == 1


async def test_tone_consistency() -> None:
    tone = create_tone_consistency_scorer()
    assert await score(tone, run_of("Great, happy to help!", "Thanks, this is great")) == 1.0
    assert await score(tone, run_of("This is terrible and awful.", "I love it, great!")) == 0.0
    stable = await tone.run(run_of("Great work. Happy day. Excellent."))
    assert stable.analyze_step_result["mode"] == "stability" and stable.score == 1.0
    mixed = await tone.run(run_of("Great work. Terrible day."))
    assert mixed.score == 0.0


def calls(*names: str) -> Any:
    return make_run(tool_calls=tuple(ToolCall(id=str(i), name=n) for i, n in enumerate(names)))


async def test_tool_call_accuracy() -> None:
    lenient = create_tool_call_accuracy_scorer(expected_tool="weather")
    strict = create_tool_call_accuracy_scorer(expected_tool="weather", strict_mode=True)
    assert await score(lenient, calls("geo", "weather")) == 1.0
    assert await score(strict, calls("geo", "weather")) == 0.0
    assert await score(strict, calls("weather")) == 1.0
    assert await score(lenient, calls()) == 0.0
    order = create_tool_call_accuracy_scorer(expected_tool_order=["geo", "weather"])
    strict_order = create_tool_call_accuracy_scorer(expected_tool_order=["geo", "weather"], strict_mode=True)
    assert await score(order, calls("geo", "log", "weather")) == 1.0
    assert await score(order, calls("weather", "geo")) == 0.0
    assert await score(strict_order, calls("geo", "log", "weather")) == 0.0
    assert await score(strict_order, calls("geo", "weather")) == 1.0
    # tool calls derived from message parts when the run has no ToolCall records
    parts_run = make_run(output=(tool_message("weather"), text_message("assistant", "ok")))
    assert await score(lenient, parts_run) == 1.0
    with pytest.raises(ValueError):
        create_tool_call_accuracy_scorer()


async def test_quick_checks() -> None:
    r = run_of("Your order #123 has shipped. Contact support@x.io")
    assert await score(create_includes_check("ORDER"), r) == 1.0
    assert await score(create_includes_check(["order", "refund"]), r) == 0.0
    assert await score(create_includes_check(["order", "refund"], match_all=False), r) == 1.0
    assert await score(create_includes_check("ORDER", case_sensitive=True), r) == 0.0
    assert await score(create_excludes_check(["sorry", "cannot"]), r) == 1.0
    assert await score(create_excludes_check("SHIPPED"), r) == 0.0
    assert await score(create_matches_check(r"#\d+"), r) == 1.0
    assert await score(create_matches_check(r"^\d+$"), r) == 0.0
    assert await score(create_non_empty_response_check(), r) == 1.0
    assert await score(create_non_empty_response_check(scale=3), run_of("  ")) == 0.0
    assert await score(create_non_empty_response_check(), make_run(output=(tool_message("x"),))) == 0.0


async def test_tool_quick_checks() -> None:
    failing = make_run(
        tool_calls=(ToolCall(id="1", name="search"), ToolCall(id="2", name="charge", error="card declined"))
    )
    assert await score(create_called_tool_check("search"), failing) == 1.0
    assert await score(create_called_tool_check("refund"), failing) == 0.0
    assert await score(create_did_not_call_check("charge"), failing) == 0.0
    assert await score(create_did_not_call_check("delete"), failing) == 1.0
    assert await score(create_max_tool_calls_check(2), failing) == 1.0
    assert await score(create_max_tool_calls_check(1), failing) == 0.0
    result = await create_no_tool_errors_check().run(failing)
    assert result.score == 0.0 and result.reason and "card declined" in result.reason
    assert await score(create_no_tool_errors_check(), calls("a")) == 1.0


async def test_code_scorers_are_deterministic() -> None:
    r = run_of("The weather in Paris is sunny and warm", "weather Paris warm?", "Sunny in Paris")
    for factory in (
        create_completeness_scorer,
        create_keyword_coverage_scorer,
        create_content_similarity_scorer,
        create_textual_difference_scorer,
        create_tone_consistency_scorer,
    ):
        scorer = factory()
        assert {(await scorer.run(r)).score for _ in range(3)} == {(await scorer.run(r)).score}


def test_message_output_text_used() -> None:
    msg = Message(role="assistant", content="", parts=(Part(type="text", content="from parts"),))
    from tracescorer.scorers.agent_io import output_text

    assert output_text(ScorerRun(output=(msg,))) == "from parts"
