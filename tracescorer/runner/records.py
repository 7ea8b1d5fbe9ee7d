"""A scorer's result as the rows it leaves: pure mapping to :class:`ScoreRecord` / :class:`DecisionRecord`."""

from __future__ import annotations

from typing import Any

from tracescorer.model import Conversation
from tracescorer.records.scores import DecisionRecord, ScoreRecord
from tracescorer.runner.bindings import BoundScorer
from tracescorer.runner.decider import Decision
from tracescorer.runner.heal_policy import TRANSIENT, error_class
from tracescorer.runner.targets import Target, decision_id, score_id
from tracescorer.scorers.errors import ScorerRunError
from tracescorer.scorers.types import ScorerResult


def decision_record(
    bound: BoundScorer,
    target: Target,
    decision: Decision,
    detail: str | None,
    source: str,
    score_row_id: str | None = None,
) -> DecisionRecord:
    return DecisionRecord(
        id=decision_id(bound.binding.id, target),
        scorer_id=bound.binding.id,
        target_type=target.kind,
        target_id=target.id,
        trace_id=target.trace_id,
        conversation_id=target.conversation_id,
        decision=decision.value,
        detail=detail,
        sample_rate=bound.binding.sampling.ratio,
        source=source,
        score_id=score_row_id,
    )


def decision_detail(record: ScoreRecord) -> str | None:
    """What the decision row says about a stored score: the error, or why it was not scorable."""
    if record.status == "error":
        return record.error
    return record.reason if record.status == "not_scorable" else None


def _judge_calls(result: ScorerResult) -> list[dict[str, Any]]:
    return [
        {
            "step": c.step,
            "model": c.model,
            "status": c.status,
            "attempts": c.attempts,
            "error": c.error,
            "cost_usd": c.cost_usd,
            "input_tokens": c.input_tokens,
            "output_tokens": c.output_tokens,
            "duration_ms": round(c.duration_ms, 2),
            **({"reused_from": c.reused_from} if c.reused_from is not None else {}),
            **({"cached_tokens": c.cached_tokens} if c.cached_tokens else {}),
            **({"cache_write_tokens": c.cache_write_tokens} if c.cache_write_tokens else {}),
        }
        for c in result.judge_calls
    ]


def score_record(
    bound: BoundScorer,
    target: Target,
    source: str,
    result: ScorerResult | None,
    error: BaseException | None,
    seconds: float,
    heal_attempts: int = 0,
) -> ScoreRecord:
    """The ``scores`` row of one run of ``bound`` on ``target``: ``result`` (None when the scorer
    raised) or ``error`` (a :class:`ScorerRunError` keeps the steps that completed);
    ``heal_attempts`` counts the automatic re-scores, this one included."""
    binding = bound.binding
    subject = target.subject
    if isinstance(subject, Conversation):
        run_ids = [r.run_id for r in subject.runs]
        last = subject.runs[-1]
        ended = max(r.ended_at for r in subject.runs)
    else:
        run_ids, last, ended = [target.run_id], subject, subject.ended_at
    metadata: dict[str, Any] = {
        "run_ids": run_ids,
        "convention": last.convention,
        "model": last.model,
        "service_name": last.service_name,
    }
    status = "error" if error is not None else (result.status if result is not None else "error")
    score = result.score if result is not None and status == "ok" else None
    label = None
    if binding.threshold is not None and score is not None:
        label = "pass" if score >= binding.threshold else "fail"
    cause = error.__cause__ if isinstance(error, ScorerRunError) and error.__cause__ else error
    if isinstance(error, ScorerRunError):
        metadata["failed_step"] = error.failed_step
        metadata["completed_steps"] = list(error.completed_steps)
    r = result
    if r is None:
        judge: tuple[Any, ...] = _NO_RESULT
    elif not r.judge_calls:  # a code scorer: what the properties give for no calls
        judge = _NO_CALLS
    else:
        metadata["judge_calls"] = _judge_calls(r)
        judge = (r.judge_model, r.judge_input_tokens, r.judge_output_tokens, r.judge_cost_usd, r.judge_attempts)
    return ScoreRecord(
        id=score_id(binding.id, target),
        scorer_id=binding.id,
        scorer_name=getattr(bound.scorer, "name", binding.id) or binding.id,
        scorer_version=bound.version or None,
        run_id=target.run_id,
        trace_id=target.trace_id,
        span_id=target.span_id,
        conversation_id=target.conversation_id,
        entity_type="conversation" if target.kind == "conversation" else "agent",
        entity_id=target.agent_name,
        source=source,
        score=score,
        reason=r.reason if r is not None else None,
        status=status,
        error=str(error) if error is not None else None,
        error_type=type(cause).__name__ if cause is not None else None,
        label=label,
        threshold=binding.threshold,
        preprocess_step_result=r.preprocess_step_result if r is not None else None,
        analyze_step_result=r.analyze_step_result if r is not None else None,
        preprocess_prompt=r.preprocess_prompt if r is not None else None,
        analyze_prompt=r.analyze_prompt if r is not None else None,
        generate_score_prompt=r.generate_score_prompt if r is not None else None,
        generate_reason_prompt=r.generate_reason_prompt if r is not None else None,
        judge_model=judge[0],
        judge_input_tokens=judge[1],
        judge_output_tokens=judge[2],
        judge_cost_usd=judge[3],
        judge_attempts=judge[4],
        duration_ms=round(seconds * 1000, 3),
        sample_rate=binding.sampling.ratio,
        metadata=metadata,
        target_ended_at=ended // 1000 if ended > 0 else None,
        error_class=error_class(error) if status == "error" else None,
        heal_attempts=heal_attempts or None,
        activity_seq=target.activity_seq,
        judge_reused=r.judge_reused or None if r is not None else None,
    )


def failure_record(
    bound: BoundScorer, target: Target, source: str, error: Exception, heal_attempts: int = 0
) -> ScoreRecord:
    """The error row of a scoring that failed outside the scorer (a bug in tracescorer, not the
    scorer's own error: that is :func:`score_record`'s). Built from the target's ids alone (the
    subject may be what failed); classed ``transient`` so that, like a judge outage, the healer
    re-scores it a bounded number of times (judge bindings), and ``explain`` shows why."""
    return ScoreRecord(
        id=score_id(bound.binding.id, target),
        scorer_id=bound.binding.id,
        scorer_name=bound.binding.id,
        scorer_version=bound.version or None,
        run_id=target.run_id,
        trace_id=target.trace_id,
        span_id=target.span_id,
        conversation_id=target.conversation_id,
        entity_type="conversation" if target.kind == "conversation" else "agent",
        entity_id=target.agent_name,
        source=source,
        score=None,
        reason=None,
        status="error",
        error=f"scoring failed unexpectedly (see the daemon log): {type(error).__name__}: {error}",
        error_type=type(error).__name__,
        sample_rate=bound.binding.sampling.ratio,
        error_class=TRANSIENT,
        heal_attempts=heal_attempts or None,
        activity_seq=target.activity_seq,
    )


# judge model, input and output tokens, cost and attempts of a score row without a result, and of
# a result without judge calls (ScorerResult's properties: attempts are counted, so 0)
_NO_RESULT: tuple[Any, ...] = (None, None, None, None, None)
_NO_CALLS: tuple[Any, ...] = (None, None, None, None, 0)
