"""Helpers shared by the prebuilt scorers."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from tracescorer.scorers.agent_io import message_text
from tracescorer.scorers.fence import FENCE_RULES
from tracescorer.scorers.judge_config import Judge
from tracescorer.scorers.scorer import PromptStep, Scorer, create_scorer
from tracescorer.scorers.types import NotScorable, ScorerRun, SkipJudge, StepResults


def make_judge(model: str, instructions: str, options: Mapping[str, Any]) -> Judge:
    """A Judge for a prebuilt LLM scorer: its instructions (plus the fence rules) and the
    caller's options (``api_base``, ``error_processors``, ``instructions`` override...)."""
    opts = dict(options)
    base = opts.pop("instructions", instructions)
    return Judge(model=model, instructions=f"{base}\n\n{FENCE_RULES}", **opts)


def check_scale(scale: float) -> float:
    """``scale`` as a float; ValueError unless it is a positive finite number (NaN and
    infinities are refused when the scorer is built, not when it first runs)."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    return float(scale)


def check_unit(name: str, value: float) -> float:
    """``value`` as a float; ValueError unless it is a number in 0..1 (booleans refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number in 0..1, got {value!r}")
    return float(value)


def ground_truth_text(run: ScorerRun[Any, Any]) -> str:
    """The run's ground truth as text ("" when it has none; structured values as JSON)."""
    gt = run.ground_truth
    if gt is None:
        return ""
    return gt if isinstance(gt, str) else message_text(gt) or json.dumps(gt, default=str)


def llm_scorer(
    *,
    id: str,
    name: str,
    description: str,
    model: str,
    instructions: str,
    options: Mapping[str, Any],
    create_prompt: Callable[..., str | NotScorable | SkipJudge],
    output_schema: type[BaseModel],
    score: Callable[[Any, ScorerRun[Any, Any]], float],
    reason: Callable[[Any, float], str],
    analyze_description: str,
) -> Scorer[Any, Any]:
    """The common shape of the prebuilt LLM judges: the judge analyses (structured output),
    a function computes the score from that analysis, another writes the reason."""
    judge = make_judge(model, instructions, options)

    def generate_score(*, run: ScorerRun[Any, Any], results: StepResults) -> float:
        return score(results.analyze_step_result, run)

    def generate_reason(*, run: ScorerRun[Any, Any], results: StepResults, score: float) -> str:
        return reason(results.analyze_step_result, score)

    return (
        create_scorer(id=id, name=name, description=description, judge=judge, type="agent")
        .analyze(PromptStep(description=analyze_description, create_prompt=create_prompt, output_schema=output_schema))
        .generate_score(generate_score)
        .generate_reason(generate_reason)
    )
