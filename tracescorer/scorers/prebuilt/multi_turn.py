"""The multi-turn judge: grades a whole conversation's assistant turns against one criterion."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from tracescorer.scorers.agent_io import assistant_texts
from tracescorer.scorers.fence import fence, numbered_transcript
from tracescorer.scorers.prebuilt._common import check_scale, llm_scorer
from tracescorer.scorers.scorer import Scorer
from tracescorer.scorers.types import ScorerRun, SkipJudge, skip_judge

MULTI_TURN_JUDGE_ID = "multi-turn-judge-scorer"

INSTRUCTIONS = (
    "You are a strict, impartial evaluator of AI assistant conversations. You decide whether "
    "the assistant's messages, taken together, satisfy a single criterion."
)


NO_ASSISTANT_MESSAGES = (
    "There were no assistant messages with text to grade, so the "
    "criterion cannot be satisfied (no judge call was made)."
)


class MultiTurnVerdict(BaseModel):
    """The judge's structured verdict."""

    satisfied: bool
    reasoning: str


def create_multi_turn_judge_scorer(
    *, model: str, criterion: str, scale: float = 1, **judge_options: Any
) -> Scorer[Any, Any]:
    """A binary LLM judge of a whole conversation (id ``multi-turn-judge-scorer``).

    Every assistant message with text in ``run.output`` is shown in order as a numbered
    transcript (text-less turns, e.g. tool-call-only ones, are skipped; user turns and tool
    results are not shown), fenced as untrusted data; bare strings inside an output list are
    not messages and are ignored. The judge returns ``{satisfied, reasoning}``; the score is
    ``scale`` when satisfied, else 0, and the reason gives the verdict, the criterion and the
    explanation. A run without any assistant text scores 0 without a judge call (as in
    Mastra: only a satisfied verdict scores), its reason saying there were no assistant
    messages. ``judge_options`` go to the :class:`~tracescorer.scorers.judge.Judge`
    (``api_base``, ``api_key``, ``temperature``, ``error_processors``...).

    Use with :func:`~tracescorer.scorers.evals.run_evals` ``inputs`` items or on a
    :class:`~tracescorer.model.Conversation`.
    """
    if not criterion or not criterion.strip():
        raise ValueError("criterion must be a non-empty string")
    factor = check_scale(scale)
    task = (
        "Decide whether the conversation below satisfies this criterion.\n\n"
        f"Criterion: {criterion.strip()}\n\n"
        "The transcript lists, in order, every message the assistant sent. The user's "
        "turns and tool results are not shown: judge the assistant's messages as a whole.\n\n"
        "Answer with `satisfied` (true only if the criterion is met) and `reasoning` "
        "(a short explanation citing the relevant turns)."
    )

    def create_prompt(*, run: ScorerRun[Any, Any], results: Any) -> str | SkipJudge:
        turns = assistant_texts(run)
        if not turns:
            return skip_judge(MultiTurnVerdict(satisfied=False, reasoning=NO_ASSISTANT_MESSAGES))
        # the scorer's fixed text first and the conversation last: a stable prefix for prompt caching
        return f"{task}\n\n{fence(numbered_transcript(turns), 'TRANSCRIPT')}"

    def score(verdict: MultiTurnVerdict, run: ScorerRun[Any, Any]) -> float:
        return factor if verdict.satisfied else 0.0

    def reason(verdict: MultiTurnVerdict, value: float) -> str:
        label = "Satisfied" if verdict.satisfied else "Not satisfied"
        return f"{label}. Criterion: {criterion.strip().rstrip('.')}. Explanation: {verdict.reasoning}"

    return llm_scorer(
        id=MULTI_TURN_JUDGE_ID,
        name="Multi-turn Judge",
        model=model,
        options=judge_options,
        description=f"Whether the conversation satisfies: {criterion.strip()}",
        instructions=INSTRUCTIONS,
        create_prompt=create_prompt,
        output_schema=MultiTurnVerdict,
        score=score,
        reason=reason,
        analyze_description="Grade the assistant's turns against the criterion",
    )
