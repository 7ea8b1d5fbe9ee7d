"""Prebuilt LLM judges of retrieved context: precision, relevance and recall.

Each reads the context the agent retrieved with :func:`retrieved_context`: the ``context=``
option when given, else the results of the run's tool calls as the trace recorded them
(``execute_tool`` spans and ``tool_call_response`` message parts; see ``docs/scorers.md`` for
each convention), optionally only those of the tools named in ``context_tools=``. A run with no
context to judge is ``not_scorable``. One judge call per run; score and reason are computed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from tracescorer.scorers.agent_io import input_text, message_text, output_text, tool_calls_of
from tracescorer.scorers.fence import fence
from tracescorer.scorers.prebuilt._common import check_scale, check_unit, ground_truth_text, llm_scorer
from tracescorer.scorers.scorer import Scorer
from tracescorer.scorers.types import NotScorable, ScorerRun, not_scorable

_EVALUATOR = (
    "You are a precise, impartial evaluator of retrieval-augmented AI agents. You "
    "judge the context an agent retrieved against the user's question and answers."
)
# Keys under which retriever tools commonly return their documents, and the text of one.
_LIST_KEYS = ("documents", "results", "chunks", "contexts", "context", "matches", "hits", "items")
_TEXT_KEYS = ("page_content", "content", "text", "document", "chunk", "snippet", "body")


def _pieces(result: Any) -> list[str]:
    """One tool result as context pieces: a list (or ``{"documents": [...]}``-like mapping) is
    one piece per element; a document mapping is its text; anything else its JSON."""
    if result is None:
        return []
    if isinstance(result, str):
        text = result.strip()
        if text[:1] in ("[", "{"):
            try:
                return _pieces(json.loads(text))
            except ValueError:
                pass
        return [text] if text else []
    if isinstance(result, Mapping):
        for key in _LIST_KEYS:
            if isinstance(result.get(key), list):
                return [p for item in result[key] for p in _pieces(item)]
        for key in _TEXT_KEYS:
            if isinstance(result.get(key), str) and result[key].strip():
                return [result[key].strip()]
        return [json.dumps(result, default=str, ensure_ascii=False)]
    if isinstance(result, (list, tuple)):
        return [p for item in result for p in _pieces(item)]
    return [str(result)]


def retrieved_context(
    run: ScorerRun[Any, Any], context: Sequence[str] | None = None, context_tools: Sequence[str] | None = None
) -> list[str]:
    """The context pieces a scorer judges: ``context`` when given, else the pieces of the
    run's tool results (of tools whose name starts with one of ``context_tools``, when given),
    in call order."""
    if context is not None:
        return [c for c in (message_text(c).strip() for c in context) if c]
    out: list[str] = []
    for call in tool_calls_of(run):
        if context_tools is not None and not any(call.name.startswith(t) for t in context_tools):
            continue
        out.extend(_pieces(call.result))
    return out


def _numbered(pieces: Sequence[str]) -> str:
    return "\n\n".join(f"[{i}] {p}" for i, p in enumerate(pieces))


def _check_context(context: Sequence[str] | None) -> None:
    if context is not None and (isinstance(context, str) or not list(context)):
        raise ValueError("context must be a non-empty list of strings (or None to read the run's tool results)")


class PieceVerdict(BaseModel):
    context_index: int
    verdict: Literal["yes", "no"]
    reason: str = ""


class PrecisionVerdicts(BaseModel):
    verdicts: list[PieceVerdict] = Field(default_factory=list)


def create_context_precision_scorer(
    *,
    model: str,
    context: Sequence[str] | None = None,
    context_tools: Sequence[str] | None = None,
    scale: float = 1,
    **judge_options: Any,
) -> Scorer[Any, Any]:
    """Whether the useful context was ranked first: the judge marks each piece useful (yes/no)
    for arriving at the expected answer (the ground truth, else the agent's response); the
    score is the mean average precision of that ranking times ``scale`` (0 when no piece is
    useful)."""
    _check_context(context)
    factor = check_scale(scale)

    def prompt(*, run: ScorerRun[Any, Any], results: Any) -> str | NotScorable:
        pieces = retrieved_context(run, context, context_tools)
        if not pieces:
            return not_scorable("no retrieved context in the run (no context= and no tool results)")
        expected = ground_truth_text(run) or output_text(run)
        if not expected.strip():
            return not_scorable("no expected answer (ground truth) and no response text")
        return (
            f"User input:\n{fence(input_text(run), 'USER_INPUT')}\n\n"
            f"Expected answer:\n{fence(expected, 'EXPECTED_ANSWER')}\n\n"
            f"Retrieved context pieces, in retrieval order:\n"
            f"{fence(_numbered(pieces), 'CONTEXT')}\n\n"
            f"For every context piece (context_index 0 to {len(pieces) - 1}), give verdict "
            "'yes' if it was useful for arriving at the expected answer, 'no' if not, with "
            "a short reason."
        )

    def score(v: PrecisionVerdicts, run: ScorerRun[Any, Any]) -> float:
        relevant, total = 0, 0.0
        for rank, verdict in enumerate(sorted(v.verdicts, key=lambda x: x.context_index), 1):
            if verdict.verdict == "yes":
                relevant += 1
                total += relevant / rank
        return 0.0 if relevant == 0 else total / relevant * factor

    def reason(v: PrecisionVerdicts, s: float) -> str:
        useful = [str(x.context_index) for x in v.verdicts if x.verdict == "yes"]
        return f"Context precision {s:.3g}: {len(useful)} of {len(v.verdicts)} piece(s) useful" + (
            f" (pieces {', '.join(useful)})" if useful else ""
        )

    return llm_scorer(
        id="context-precision-scorer",
        name="Context Precision",
        model=model,
        description="Whether useful retrieved context is ranked first",
        instructions=_EVALUATOR,
        options=judge_options,
        create_prompt=prompt,
        output_schema=PrecisionVerdicts,
        score=score,
        reason=reason,
        analyze_description="Judge each context piece's usefulness",
    )


class RelevanceEvaluation(BaseModel):
    context_index: int
    relevance_level: Literal["high", "medium", "low", "none"]
    was_used: bool
    reasoning: str = ""


class RelevanceAnalysis(BaseModel):
    evaluations: list[RelevanceEvaluation] = Field(default_factory=list)
    missing_context: list[str] = Field(default_factory=list)
    overall_assessment: str = ""


RELEVANCE_WEIGHTS = {"high": 1.0, "medium": 0.7, "low": 0.3, "none": 0.0}


def create_context_relevance_scorer(
    *,
    model: str,
    context: Sequence[str] | None = None,
    context_tools: Sequence[str] | None = None,
    unused_high_relevance_penalty: float = 0.1,
    missing_context_penalty: float = 0.15,
    max_missing_context_penalty: float = 0.5,
    scale: float = 1,
    **judge_options: Any,
) -> Scorer[Any, Any]:
    """How relevant and useful the retrieved context was for the response (Mastra's formula).

    The judge rates each piece's relevance (high 1.0, medium 0.7, low 0.3, none 0), says
    whether the response used it, and lists missing context. Score =
    ``max(0, mean weight - unused_high_relevance_penalty * unused high pieces -
    min(missing_context_penalty * missing, max_missing_context_penalty)) * scale``.
    """
    _check_context(context)
    factor = check_scale(scale)
    for name, value in (
        ("unused_high_relevance_penalty", unused_high_relevance_penalty),
        ("missing_context_penalty", missing_context_penalty),
        ("max_missing_context_penalty", max_missing_context_penalty),
    ):
        check_unit(name, value)

    def prompt(*, run: ScorerRun[Any, Any], results: Any) -> str | NotScorable:
        pieces = retrieved_context(run, context, context_tools)
        if not pieces:
            return not_scorable("no retrieved context in the run (no context= and no tool results)")
        response = output_text(run)
        if not response.strip():
            return not_scorable("the run has no output text")
        return (
            f"User input:\n{fence(input_text(run), 'USER_INPUT')}\n\n"
            f"Agent response:\n{fence(response, 'AGENT_RESPONSE')}\n\n"
            f"Context pieces the agent had:\n{fence(_numbered(pieces), 'CONTEXT')}\n\n"
            f"For every context piece (context_index 0 to {len(pieces) - 1}) rate "
            "relevance_level to the user input (high, medium, low, none) and say whether "
            "the response used it (was_used), with reasoning. In missing_context list "
            "information the agent needed but the context lacked. Add an "
            "overall_assessment."
        )

    def score(a: RelevanceAnalysis, run: ScorerRun[Any, Any]) -> float:
        if not a.evaluations:
            return 0.0 if a.missing_context else factor
        base = sum(RELEVANCE_WEIGHTS[e.relevance_level] for e in a.evaluations) / len(a.evaluations)
        unused = sum(1 for e in a.evaluations if e.relevance_level == "high" and not e.was_used)
        missing = min(len(a.missing_context) * missing_context_penalty, max_missing_context_penalty)
        return max(0.0, base - unused * unused_high_relevance_penalty - missing) * factor

    def reason(a: RelevanceAnalysis, s: float) -> str:
        levels = ", ".join(
            f"[{e.context_index}] {e.relevance_level}" + ("" if e.was_used else " (unused)") for e in a.evaluations[:20]
        )
        missing = f" Missing: {'; '.join(a.missing_context[:5])}." if a.missing_context else ""
        return f"Context relevance {s:.3g}: {levels}.{missing} {a.overall_assessment}".strip()

    return llm_scorer(
        id="context-relevance-scorer",
        name="Context Relevance",
        model=model,
        description="How relevant and useful the retrieved context was",
        instructions=_EVALUATOR,
        options=judge_options,
        create_prompt=prompt,
        output_schema=RelevanceAnalysis,
        score=score,
        reason=reason,
        analyze_description="Rate each context piece's relevance and use",
    )


class ClaimAttribution(BaseModel):
    claim: str
    verdict: Literal["yes", "no"]
    reason: str = ""


class RecallVerdicts(BaseModel):
    verdicts: list[ClaimAttribution] = Field(default_factory=list)


def create_context_recall_scorer(
    *,
    model: str,
    context: Sequence[str] | None = None,
    context_tools: Sequence[str] | None = None,
    scale: float = 1,
    **judge_options: Any,
) -> Scorer[Any, Any]:
    """How much of the reference answer the retrieved context covers: the judge splits the
    ground truth into atomic claims and marks each attributable to the context (yes/no);
    score = attributable / claims * ``scale`` (0 when the reference has no claims). Needs a
    ground truth: runs without one are ``not_scorable``."""
    _check_context(context)
    factor = check_scale(scale)

    def prompt(*, run: ScorerRun[Any, Any], results: Any) -> str | NotScorable:
        reference = ground_truth_text(run)
        if not reference.strip():
            return not_scorable("context recall needs a ground truth (reference answer)")
        pieces = retrieved_context(run, context, context_tools)
        if not pieces:
            return not_scorable("no retrieved context in the run (no context= and no tool results)")
        return (
            f"Reference answer:\n{fence(reference, 'REFERENCE')}\n\n"
            f"Retrieved context:\n{fence(_numbered(pieces), 'CONTEXT')}\n\n"
            "Split the reference answer into its atomic factual claims. For each claim give "
            "verdict 'yes' if it can be attributed to the retrieved context, 'no' if not, "
            "with a short reason."
        )

    def score(v: RecallVerdicts, run: ScorerRun[Any, Any]) -> float:
        n = len(v.verdicts)
        return 0.0 if n == 0 else sum(1 for c in v.verdicts if c.verdict == "yes") / n * factor

    def reason(v: RecallVerdicts, s: float) -> str:
        missed = [c.claim for c in v.verdicts if c.verdict == "no"]
        return (
            f"Context recall {s:.3g}: {len(v.verdicts) - len(missed)} of {len(v.verdicts)} "
            "reference claim(s) found in the context" + (f"; not found: {'; '.join(missed[:5])}" if missed else "")
        )

    return llm_scorer(
        id="context-recall-scorer",
        name="Context Recall",
        model=model,
        description="How much of the reference answer the context covers",
        instructions=_EVALUATOR,
        options=judge_options,
        create_prompt=prompt,
        output_schema=RecallVerdicts,
        score=score,
        reason=reason,
        analyze_description="Attribute each reference claim to the context",
    )
