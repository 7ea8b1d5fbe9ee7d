"""Trajectory scorers: the sequence of tool calls an agent made, against an expected one.

The trajectory of a run is its tool calls in order (``run.input.tool_calls`` from the trace,
else the ``tool_call`` parts of the output), each a step named after the tool with its
arguments and result. The expected trajectory is the ``expected_trajectory=`` option, else the
run's ground truth when it is a list of steps or ``{"steps": [...]}``. A step is a tool name or
``{"name": ..., "arguments": ..., "result": ...}`` (arguments/result compared only when given).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from tracescorer.model import ToolCall
from tracescorer.scorers.agent_io import input_text, output_text, tool_calls_of
from tracescorer.scorers.fence import fence
from tracescorer.scorers.prebuilt._common import check_scale, llm_scorer
from tracescorer.scorers.scorer import Scorer, create_scorer
from tracescorer.scorers.types import NotScorable, ScorerRun, StepResults, not_scorable

Ordering = Literal["strict", "relaxed", "unordered"]
_MISSING = object()


@dataclass(frozen=True, kw_only=True, slots=True)
class ExpectedStep:
    """One expected step: the tool ``name``, and optionally its ``arguments`` / ``result``."""

    name: str
    arguments: Any = _MISSING
    result: Any = _MISSING

    def matches(self, call: ToolCall) -> bool:
        if call.name != self.name:
            return False
        for want, have in ((self.arguments, call.arguments), (self.result, call.result)):
            if want is not _MISSING and _canonical(want) != _canonical(have):
                return False
        return True


def _canonical(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return f"text:{value}"
    return json.dumps(value, sort_keys=True, default=str)


def expected_steps(value: Any) -> list[ExpectedStep] | None:
    """Expected steps from a list of names / step dicts or ``{"steps": [...]}``; ``None``
    when ``value`` is not a trajectory. ValueError for a malformed step."""
    if isinstance(value, Mapping) and "steps" in value:
        value = value["steps"]
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        return None
    steps: list[ExpectedStep] = []
    for item in value:
        if isinstance(item, ExpectedStep):
            steps.append(item)
        elif isinstance(item, str) and item:
            steps.append(ExpectedStep(name=item))
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
            steps.append(
                ExpectedStep(
                    name=item["name"],
                    arguments=item.get("arguments", item.get("args", _MISSING)),
                    result=item.get("result", _MISSING),
                )
            )
        else:
            raise ValueError(f"an expected step is a tool name or {{'name': ...}}, got {item!r}")
    return steps


def compare_trajectory(
    actual: Sequence[ToolCall],
    expected: Sequence[ExpectedStep],
    *,
    ordering: Ordering = "relaxed",
    allow_repeated_steps: bool = True,
) -> dict[str, Any]:
    """Mastra's trajectory comparison: the score (0-1) and the matched, missing, extra,
    out-of-order and repeated steps.

    - ``strict``: position by position; extra steps beyond the expected length cost half their
      share each.
    - ``relaxed``: the expected steps in order, other steps allowed in between.
    - ``unordered``: each expected step present (each actual step matches one expected step).

    Without ``allow_repeated_steps`` each repeated tool name costs 0.1.
    """
    names = [c.name for c in actual]
    wanted = [s.name for s in expected]
    repeated = sorted({n for n in names if names.count(n) > 1})
    matched_idx: set[int] = set()
    out_of_order: list[str] = []
    if not expected:
        score = 1.0 if not actual else 0.0
    elif ordering == "strict":
        for i in range(max(len(names), len(wanted))):
            if i < len(names) and i < len(wanted) and expected[i].matches(actual[i]):
                matched_idx.add(i)
            elif i < len(names) and names[i] in wanted:
                out_of_order.append(names[i])
        score = len(matched_idx) / len(wanted)
        if len(names) > len(wanted):
            score -= (len(names) - len(wanted)) / len(wanted) * 0.5
    elif ordering == "unordered":
        used: set[int] = set()
        for i, step in enumerate(expected):
            j = next((j for j, c in enumerate(actual) if j not in used and step.matches(c)), None)
            if j is not None:
                used.add(j)
                matched_idx.add(i)
        score = len(matched_idx) / len(wanted)
    elif ordering == "relaxed":
        last = -1
        for i, step in enumerate(expected):
            j = next((j for j in range(last + 1, len(actual)) if step.matches(actual[j])), None)
            if j is None:
                if step.name in names:
                    out_of_order.append(step.name)
            else:
                last = j
                matched_idx.add(i)
        score = len(matched_idx) / len(wanted)
    else:
        raise ValueError(f"ordering must be strict, relaxed or unordered, got {ordering!r}")
    if not allow_repeated_steps and repeated:
        score -= 0.1 * len(repeated)
    return {
        "score": max(0.0, min(1.0, score)),
        "matched": len(matched_idx),
        "expected": wanted,
        "actual": names,
        "missing": [n for i, n in enumerate(wanted) if i not in matched_idx],
        "extra": [n for n in names if n not in wanted],
        "out_of_order": out_of_order,
        "repeated": repeated,
    }


def _resolve(run: ScorerRun[Any, Any], static: list[ExpectedStep] | None) -> list[ExpectedStep] | NotScorable:
    steps = static if static is not None else expected_steps(run.ground_truth)
    if steps is None:
        return not_scorable("no expected trajectory (expected_trajectory= or a ground truth list of steps)")
    return steps


def create_trajectory_accuracy_scorer(
    *,
    expected_trajectory: Sequence[Any] | None = None,
    ordering: Ordering = "relaxed",
    allow_repeated_steps: bool = True,
    scale: float = 1,
) -> Scorer[Any, Any]:
    """How well the run's tool-call trajectory matches the expected one (code, no judge):
    :func:`compare_trajectory` with ``ordering`` / ``allow_repeated_steps``, times ``scale``.
    The analysis holds the comparison."""
    if ordering not in ("strict", "relaxed", "unordered"):
        raise ValueError(f"ordering must be strict, relaxed or unordered, got {ordering!r}")
    static = expected_steps(expected_trajectory) if expected_trajectory is not None else None
    if expected_trajectory is not None and static is None:
        raise ValueError("expected_trajectory must be a list of steps")
    factor = check_scale(scale)

    def analyze(*, run: ScorerRun[Any, Any], results: StepResults) -> dict[str, Any] | NotScorable:
        steps = _resolve(run, static)
        if isinstance(steps, NotScorable):
            return steps
        return compare_trajectory(
            tool_calls_of(run), steps, ordering=ordering, allow_repeated_steps=allow_repeated_steps
        )

    def reason(*, run: ScorerRun[Any, Any], results: StepResults, score: float) -> str:
        a = results.analyze_step_result
        parts = [
            f"{a['matched']} of {len(a['expected'])} expected step(s) matched ({ordering})",
            f"expected {' -> '.join(a['expected']) or 'no steps'}",
            f"called {' -> '.join(a['actual']) or 'no tools'}",
        ]
        for key in ("missing", "extra", "out_of_order", "repeated"):
            if a[key]:
                parts.append(f"{key.replace('_', ' ')}: {', '.join(a[key])}")
        return f"Trajectory accuracy {score:.3g}: " + "; ".join(parts)

    return (
        create_scorer(
            id="trajectory-accuracy-scorer",
            name="Trajectory Accuracy",
            type="agent",
            description="Tool-call trajectory vs the expected one",
        )
        .analyze(analyze)
        .generate_score(lambda *, run, results: results.analyze_step_result["score"] * factor)
        .generate_reason(reason)
    )


class StepEvaluation(BaseModel):
    step_name: str
    was_necessary: bool
    was_in_order: bool
    reasoning: str = ""


class TrajectoryAnalysis(BaseModel):
    step_evaluations: list[StepEvaluation] = Field(default_factory=list)
    missing_steps: list[str] = Field(default_factory=list)
    extra_steps: list[str] = Field(default_factory=list)
    overall_assessment: str = ""


def _format_calls(calls: Sequence[ToolCall]) -> str:
    lines = []
    for i, c in enumerate(calls, 1):
        detail = f" args: {json.dumps(c.arguments, default=str)}" if c.arguments is not None else ""
        if c.error:
            detail += f" error: {c.error}"
        elif c.result is not None:
            detail += f" result: {json.dumps(c.result, default=str)[:500]}"
        lines.append(f"{i}. {c.name}{detail}")
    return "\n".join(lines) or "(no tool calls)"


def create_trajectory_accuracy_llm_scorer(
    *, model: str, expected_trajectory: Sequence[Any] | None = None, scale: float = 1, **judge_options: Any
) -> Scorer[Any, Any]:
    """An LLM judge of the run's tool-call trajectory: for each step whether it was necessary
    and in a sensible position, plus steps that were missing, against the expected trajectory
    when one is given (option or ground truth), else against the task.

    Score = ``(0.6 * necessary share + 0.3 * in-order share + 0.1 * (1 - missing share)) *
    scale`` (missing share = missing / (steps + missing)); with no steps, ``scale`` unless
    steps were missing. (Mastra subtracts the missing share instead, so a perfect trajectory
    scores 0.9 there; here it scores 1.)
    """
    static = expected_steps(expected_trajectory) if expected_trajectory is not None else None
    if expected_trajectory is not None and static is None:
        raise ValueError("expected_trajectory must be a list of steps")
    factor = check_scale(scale)

    def prompt(*, run: ScorerRun[Any, Any], results: Any) -> str:
        steps = static if static is not None else expected_steps(run.ground_truth)
        expected = ""
        if steps:
            listed = "\n".join(
                f"{i}. {s.name}"
                + (f" args: {json.dumps(s.arguments, default=str)}" if s.arguments is not _MISSING else "")
                for i, s in enumerate(steps, 1)
            )
            expected = f"Expected trajectory:\n{listed}\n\n"
        return (
            f"User input:\n{fence(input_text(run), 'USER_INPUT')}\n\n{expected}"
            f"Tool calls the agent made, in order:\n"
            f"{fence(_format_calls(tool_calls_of(run)), 'TRAJECTORY')}\n\n"
            f"Agent response:\n{fence(output_text(run), 'AGENT_RESPONSE')}\n\n"
            "Evaluate the trajectory. For each tool call, in order, give step_name, "
            "was_necessary (needed for the task"
            + (", or in the expected trajectory" if steps else "")
            + "), was_in_order (in a logical position) and reasoning. List missing_steps "
            "(needed but not taken), extra_steps (unnecessary or redundant) and an "
            "overall_assessment."
        )

    def score(a: TrajectoryAnalysis, run: ScorerRun[Any, Any]) -> float:
        n, missing = len(a.step_evaluations), len(a.missing_steps)
        if n == 0:
            return 0.0 if missing else factor
        necessary = sum(1 for e in a.step_evaluations if e.was_necessary) / n
        in_order = sum(1 for e in a.step_evaluations if e.was_in_order) / n
        return (0.6 * necessary + 0.3 * in_order + 0.1 * (1 - missing / (n + missing))) * factor

    def reason(a: TrajectoryAnalysis, s: float) -> str:
        notes = ""
        if a.missing_steps:
            notes += f" Missing: {', '.join(a.missing_steps)}."
        if a.extra_steps:
            notes += f" Extra: {', '.join(a.extra_steps)}."
        return (f"Trajectory {s:.3g}: {len(a.step_evaluations)} step(s) judged.{notes} {a.overall_assessment}").strip()

    return llm_scorer(
        id="llm-trajectory-accuracy-scorer",
        name="Trajectory Accuracy (LLM)",
        model=model,
        description="LLM judgement of the tool-call trajectory",
        instructions="You are a precise, impartial evaluator of AI agent tool use.",
        options=judge_options,
        create_prompt=prompt,
        output_schema=TrajectoryAnalysis,
        score=score,
        reason=reason,
        analyze_description="Judge each step of the trajectory",
    )
