"""Prebuilt LLM judges comparing the response with a reference: answer similarity (against
the ground truth), noise sensitivity (against a baseline response) and summarization (against
the source text). Agent text is fenced as untrusted data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from tracescorer.scorers.agent_io import assistant_texts, input_text, output_text
from tracescorer.scorers.fence import fence
from tracescorer.scorers.prebuilt._common import check_scale, check_unit, ground_truth_text, llm_scorer, make_judge
from tracescorer.scorers.scorer import PromptStep, Scorer, create_scorer
from tracescorer.scorers.types import (
    NotScorable,
    ScorerRun,
    SkipJudge,
    StepResults,
    not_scorable,
    skip_judge,
)

_EVALUATOR = "You are a precise, impartial evaluator of AI agent responses."


class UnitMatch(BaseModel):
    ground_truth_unit: str
    output_unit: str | None = None
    match_type: Literal["exact", "semantic", "partial", "missing"]
    explanation: str = ""


class Contradiction(BaseModel):
    output_unit: str
    ground_truth_unit: str
    explanation: str = ""


class SimilarityAnalysis(BaseModel):
    matches: list[UnitMatch] = Field(default_factory=list)
    extra_in_output: list[str] = Field(default_factory=list)
    contradictions: list[Contradiction] = Field(default_factory=list)


def create_answer_similarity_scorer(
    *,
    model: str,
    require_ground_truth: bool = True,
    semantic_threshold: float = 0.8,
    exact_match_bonus: float = 0.2,
    missing_penalty: float = 0.15,
    contradiction_penalty: float = 1.0,
    extra_info_penalty: float = 0.05,
    scale: float = 1,
    **judge_options: Any,
) -> Scorer[Any, Any]:
    """How closely the response matches the ground truth, unit by unit (Mastra's formula).

    The judge splits the ground truth into semantic units and matches each in the response
    (exact, semantic, partial or missing), listing contradictions and extra information. Per
    unit: exact ``1 + exact_match_bonus``, semantic ``semantic_threshold``, partial half of it,
    missing ``-missing_penalty``; the sum over ``units * (1 + exact_match_bonus)``, minus
    ``contradiction_penalty`` per contradiction and ``extra_info_penalty`` per extra item
    (capped at 0.2), clamped to 0..1, times ``scale``. Without a ground truth the run is
    ``not_scorable`` (``require_ground_truth=False``: scores 0 without a judge call).
    """
    factor = check_scale(scale)
    semantic = check_unit("semantic_threshold", semantic_threshold)
    bonus = check_unit("exact_match_bonus", exact_match_bonus)
    missing = check_unit("missing_penalty", missing_penalty)
    contradiction = check_unit("contradiction_penalty", contradiction_penalty)
    extra = check_unit("extra_info_penalty", extra_info_penalty)

    def prompt(*, run: ScorerRun[Any, Any], results: Any) -> str | NotScorable | SkipJudge:
        reference = ground_truth_text(run)
        if not reference.strip():
            if require_ground_truth:
                return not_scorable("answer similarity needs a ground truth")
            return skip_judge(SimilarityAnalysis())
        return (
            f"Ground truth answer:\n{fence(reference, 'GROUND_TRUTH')}\n\n"
            f"Agent response:\n{fence(output_text(run), 'AGENT_RESPONSE')}\n\n"
            "Split the ground truth into its semantic units (facts, values, steps). For "
            "each unit give the matching part of the agent response (output_unit, null "
            "when absent) and match_type: 'exact' (same information, same wording), "
            "'semantic' (same information, different wording), 'partial' (some of it) or "
            "'missing'. List in extra_in_output the response's information that is not in "
            "the ground truth, and in contradictions every place where the response "
            "contradicts the ground truth."
        )

    def score(a: SimilarityAnalysis, run: ScorerRun[Any, Any]) -> float:
        if not a.matches:
            return 0.0
        weights = {"exact": 1.0 + bonus, "semantic": semantic, "partial": semantic * 0.5, "missing": -missing}
        value = sum(weights[m.match_type] for m in a.matches) / (len(a.matches) * (1.0 + bonus))
        value -= len(a.contradictions) * contradiction
        value -= min(len(a.extra_in_output) * extra, 0.2)
        return max(0.0, min(1.0, value)) * factor

    def reason(a: SimilarityAnalysis, s: float) -> str:
        if not a.matches:
            return f"Answer similarity {s:.3g}: no ground truth units to compare"
        kinds = {k: sum(1 for m in a.matches if m.match_type == k) for k in ("exact", "semantic", "partial", "missing")}
        counts = ", ".join(f"{n} {k}" for k, n in kinds.items() if n)
        notes = "".join(f" Contradiction: {c.explanation or c.output_unit}." for c in a.contradictions[:3])
        return f"Answer similarity {s:.3g}: {counts} of {len(a.matches)} unit(s).{notes}"

    return llm_scorer(
        id="answer-similarity-scorer",
        name="Answer Similarity",
        model=model,
        description="How similar the response is to the ground truth",
        instructions=_EVALUATOR,
        options=judge_options,
        create_prompt=prompt,
        output_schema=SimilarityAnalysis,
        score=score,
        reason=reason,
        analyze_description="Match ground truth units in the response",
    )


class NoiseDimension(BaseModel):
    dimension: str
    impact_level: Literal["none", "minimal", "moderate", "significant", "severe"]
    specific_changes: str = ""
    noise_influence: str = ""


class NoiseAnalysis(BaseModel):
    dimensions: list[NoiseDimension] = Field(default_factory=list)
    overall_assessment: str = ""
    major_issues: list[str] = Field(default_factory=list)
    robustness_score: float = Field(ge=0, le=1)


IMPACT_WEIGHTS = {"none": 1.0, "minimal": 0.85, "moderate": 0.6, "significant": 0.3, "severe": 0.1}


def create_noise_sensitivity_scorer(
    *,
    model: str,
    baseline_response: str,
    noisy_query: str,
    noise_type: str | None = None,
    impact_weights: Mapping[str, float] | None = None,
    major_issue_penalty: float = 0.1,
    max_major_issue_penalty: float = 0.3,
    discrepancy_threshold: float = 0.2,
    scale: float = 1,
    **judge_options: Any,
) -> Scorer[Any, Any]:
    """How robust the agent is to noise: the scored run is the agent's answer to
    ``noisy_query`` (the original query plus distracting or misleading content), compared with
    ``baseline_response``, its answer to the clean query (the run's input).

    The judge rates the impact of the noise per dimension (accuracy, completeness, relevance,
    ...: none 1.0, minimal 0.85, moderate 0.6, significant 0.3, severe 0.1), lists major issues
    and gives a robustness score. As in Mastra the score is the judge's robustness score, or
    the mean impact weight when they differ by more than ``discrepancy_threshold`` and that is
    lower, minus ``major_issue_penalty`` per major issue (at most
    ``max_major_issue_penalty``), times ``scale``.
    """
    if not baseline_response or not baseline_response.strip():
        raise ValueError("baseline_response must be a non-empty string")
    if not noisy_query or not noisy_query.strip():
        raise ValueError("noisy_query must be a non-empty string")
    factor = check_scale(scale)
    weights = {**IMPACT_WEIGHTS, **(impact_weights or {})}
    unknown = set(weights) - set(IMPACT_WEIGHTS)
    if unknown:
        raise ValueError(f"unknown impact levels {sorted(unknown)}; known: {list(IMPACT_WEIGHTS)}")
    for level, weight in weights.items():
        check_unit(f"impact_weights[{level!r}]", weight)
    penalty = check_unit("major_issue_penalty", major_issue_penalty)
    max_penalty = check_unit("max_major_issue_penalty", max_major_issue_penalty)
    threshold = check_unit("discrepancy_threshold", discrepancy_threshold)

    def prompt(*, run: ScorerRun[Any, Any], results: Any) -> str | NotScorable:
        query, response = input_text(run), output_text(run)
        if not query.strip() or not response.strip():
            return not_scorable(
                "noise sensitivity needs the original query (the run's input) "
                "and the response to the noisy query (its output)"
            )
        kind = f" The noise is of type: {noise_type}." if noise_type else ""
        return (
            f"Original query:\n{fence(query, 'ORIGINAL_QUERY')}\n\n"
            f"Baseline response (to the original query):\n"
            f"{fence(baseline_response, 'BASELINE_RESPONSE')}\n\n"
            f"Noisy query (the original with added noise):\n{fence(noisy_query, 'NOISY_QUERY')}"
            f"\n\nResponse to the noisy query:\n{fence(response, 'NOISY_RESPONSE')}\n\n"
            f"Judge how much the noise degraded the response compared with the baseline.{kind} "
            "For each dimension (accuracy, completeness, relevance, consistency, "
            "hallucination resistance) give impact_level (none, minimal, moderate, "
            "significant, severe), the specific changes and how the noise influenced them. "
            "List major_issues, give an overall_assessment and a robustness_score from 0 "
            "(fully derailed) to 1 (unaffected)."
        )

    def score(a: NoiseAnalysis, run: ScorerRun[Any, Any]) -> float:
        value = max(0.0, min(1.0, a.robustness_score))
        if a.dimensions:
            calculated = sum(weights[d.impact_level] for d in a.dimensions) / len(a.dimensions)
            if abs(value - calculated) > threshold:
                value = min(value, calculated)
        value -= min(len(a.major_issues) * penalty, max_penalty)
        return max(0.0, value) * factor

    def reason(a: NoiseAnalysis, s: float) -> str:
        impacts = ", ".join(f"{d.dimension}: {d.impact_level}" for d in a.dimensions[:8])
        issues = f" Major issues: {'; '.join(a.major_issues[:3])}." if a.major_issues else ""
        return f"Noise robustness {s:.3g} ({impacts}).{issues} {a.overall_assessment}".strip()

    return llm_scorer(
        id="noise-sensitivity-scorer",
        name="Noise Sensitivity",
        model=model,
        description="How robust the response is to noise in the query",
        instructions=_EVALUATOR,
        options=judge_options,
        create_prompt=prompt,
        output_schema=NoiseAnalysis,
        score=score,
        reason=reason,
        analyze_description="Compare the noisy response with the baseline",
    )


class ClaimSupport(BaseModel):
    claim: str
    supported: bool
    reason: str = ""


class SourceJudgement(BaseModel):
    alignment: list[ClaimSupport] = Field(default_factory=list)
    questions: list[str] = Field(default_factory=list)


class QuestionCoverage(BaseModel):
    question: str
    answered: bool
    reason: str = ""


class CoverageJudgement(BaseModel):
    coverage: list[QuestionCoverage] = Field(default_factory=list)


def summary_axes(source: SourceJudgement, coverage: CoverageJudgement | None, max_questions: int) -> dict[str, Any]:
    """Alignment (supported claims / claims) and coverage (answered questions / questions
    asked, so unanswered ones count against), with the claims and questions behind them."""
    questions = source.questions[:max_questions]
    judged = (coverage.coverage if coverage else [])[: len(questions)]
    claims = source.alignment
    return {
        "alignment": sum(1 for c in claims if c.supported) / len(claims) if claims else 0.0,
        "coverage": sum(1 for q in judged if q.answered) / len(questions) if questions else 0.0,
        "unsupported_claims": [c.claim for c in claims if not c.supported],
        "missing_questions": [q.question for q in judged if not q.answered],
        "scorable": bool(claims) and bool(questions),
    }


def create_summarization_scorer(
    *, model: str, source: str | None = None, max_questions: int = 10, scale: float = 1, **judge_options: Any
) -> Scorer[Any, Any]:
    """How good the response is as a summary of ``source`` (default: the run's user input).

    Two judge calls, as in Mastra: the first checks each claim of the summary against the
    source (alignment) and draws up to ``max_questions`` questions the source answers; the
    second answers those questions from the summary alone, never seeing the source (coverage).
    Score = ``min(alignment, coverage) * scale``, so a summary passes only by being both
    faithful and complete; 0 when the summary makes no claims or the source yields no
    questions. The summary is the last assistant message with text.
    """
    if isinstance(max_questions, bool) or not isinstance(max_questions, int) or max_questions < 1:
        raise ValueError(f"max_questions must be a whole number >= 1, got {max_questions!r}")
    factor = check_scale(scale)
    judge = make_judge(
        model,
        "You are a precise, impartial evaluator of summaries. You check summaries against their source text.",
        judge_options,
    )

    def summary(run: ScorerRun[Any, Any]) -> str:
        texts = assistant_texts(run)
        return texts[-1] if texts else ""

    def source_prompt(*, run: ScorerRun[Any, Any], results: StepResults) -> str | NotScorable:
        text = source if source is not None else input_text(run)
        if not text.strip():
            return not_scorable("no source text to judge the summary against")
        if not summary(run).strip():
            return not_scorable("the run has no summary text")
        return (
            f"Source text:\n{fence(text, 'SOURCE')}\n\n"
            f"Summary:\n{fence(summary(run), 'SUMMARY')}\n\n"
            "1. alignment: split the summary into its claims; for each say whether the "
            "source supports it (supported true/false) and why.\n"
            f"2. questions: write up to {max_questions} short questions that the source text "
            "answers and a good summary should answer too (its key facts)."
        )

    def coverage_prompt(*, run: ScorerRun[Any, Any], results: StepResults) -> str | SkipJudge:
        questions = results.preprocess_step_result.questions[:max_questions]
        if not questions:
            return skip_judge(CoverageJudgement())
        listed = "\n".join(f"{i}. {q}" for i, q in enumerate(questions, 1))
        return (
            f"Summary:\n{fence(summary(run), 'SUMMARY')}\n\nQuestions:\n{listed}\n\n"
            "Using only the summary (no other knowledge), say for each question, in order, "
            "whether the summary answers it (answered true/false) and why."
        )

    def score(*, run: ScorerRun[Any, Any], results: StepResults) -> float:
        axes = summary_axes(results.preprocess_step_result, results.analyze_step_result, max_questions)
        return min(axes["alignment"], axes["coverage"]) * factor if axes["scorable"] else 0.0

    def reason(*, run: ScorerRun[Any, Any], results: StepResults, score: float) -> str:
        axes = summary_axes(results.preprocess_step_result, results.analyze_step_result, max_questions)
        lower = "alignment" if axes["alignment"] <= axes["coverage"] else "coverage"
        notes = ""
        if axes["unsupported_claims"]:
            notes += f" Unsupported: {'; '.join(axes['unsupported_claims'][:3])}."
        if axes["missing_questions"]:
            notes += f" Not covered: {'; '.join(axes['missing_questions'][:3])}."
        return (
            f"Summarization {score:.3g} = {lower} (alignment {axes['alignment']:.2f}, "
            f"coverage {axes['coverage']:.2f}).{notes}"
        )

    return (
        create_scorer(
            id="summarization-scorer",
            name="Summarization",
            type="agent",
            description="Whether the summary is faithful to and covers its source",
            judge=judge,
        )
        .preprocess(
            PromptStep(
                description="Check summary claims and draw source questions",
                create_prompt=source_prompt,
                output_schema=SourceJudgement,
            )
        )
        .analyze(
            PromptStep(
                description="Answer the questions from the summary alone",
                create_prompt=coverage_prompt,
                output_schema=CoverageJudgement,
            )
        )
        .generate_score(score)
        .generate_reason(reason)
    )
