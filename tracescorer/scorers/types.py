"""Data shapes of a scorer run: what a scorer reads (:class:`ScorerRun`), what the steps see
(:class:`StepResults`) and what it returns (:class:`ScorerResult`, with one :class:`JudgeCall`
per judge request)."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from tracescorer.slotted import stored_through_slots

InputT = TypeVar("InputT")
OutputT = TypeVar("OutputT")

StepName = Literal["preprocess", "analyze", "generate_score", "generate_reason"]
STEP_ORDER: tuple[StepName, ...] = ("preprocess", "analyze", "generate_score", "generate_reason")

ResultStatus = Literal["ok", "not_scorable", "error"]


@stored_through_slots
@dataclass(frozen=True, kw_only=True, slots=True)
class ScorerRun(Generic[InputT, OutputT]):
    """What a scorer evaluates.

    Attributes:
        output: the target output (for ``type="agent"`` scorers: the assistant messages).
        input: the target input (for ``type="agent"``: an :class:`~tracescorer.scorers.agent_io.AgentInput`).
        run_id: id of the scored run; :meth:`Scorer.run` generates one when absent.
        ground_truth: an optional expected value / reference.
        request_context: optional context of the request being scored.
        metadata: where the run came from (``trace_id``, ``span_id``, ``conversation_id``,
            ``agent_name``, ``entity_type``, ...); not read by the pipeline.
    """

    output: OutputT
    input: InputT | None = None
    run_id: str | None = None
    ground_truth: Any = None
    request_context: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@stored_through_slots
@dataclass(frozen=True, kw_only=True, slots=True)
class StepResults:
    """The results of the steps that already ran, passed to later steps as ``results=``."""

    preprocess_step_result: Any = None
    analyze_step_result: Any = None
    generate_score_step_result: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class NotScorable:
    """Returned by a step (via :func:`not_scorable`) to stop the run without a score."""

    reason: str | None = None


def not_scorable(reason: str | None = None) -> NotScorable:
    """Return this from any step to end the run with ``status="not_scorable"`` and no score.

    Example: ``return not_scorable("the agent produced no text")``; the reason is optional.
    """
    return NotScorable(reason=reason)


@dataclass(frozen=True, kw_only=True, slots=True)
class SkipJudge:
    """Returned by a ``create_prompt`` (via :func:`skip_judge`) to skip the judge call."""

    result: Any = None


def skip_judge(result: Any = None) -> SkipJudge:
    """Return this from a prompt step's ``create_prompt`` to skip the judge: ``result`` becomes
    the step result as if the judge had answered it (for ``generate_score``: the score).

    Example: ``return skip_judge(MultiTurnVerdict(satisfied=False, reasoning="no turns"))``.
    """
    return SkipJudge(result=result)


@dataclass(frozen=True, kw_only=True, slots=True)
class JudgeCall:
    """One judge request as made by a prompt step (one record per logical call, not per attempt).

    ``prompt`` is the step's prompt as sent, after the judge's input processors (so redacted
    when :class:`~tracescorer.scorers.processors.RedactPII` ran). ``status`` is ``ok`` or
    ``error``; ``attempts`` counts provider attempts including error-processor retries;
    ``cost_usd`` comes from litellm's price table and is ``None`` when the model is unknown.
    ``structured_output`` says how JSON was asked for: ``native`` (``response_format``),
    ``prompt`` (schema in the prompt; also the second call of the ``auto`` fallback) or
    ``none`` (a text step). ``input_processors`` names the processors that ran on the messages;
    ``redactions`` counts redacted items by kind when a redacting processor ran (``{}`` when
    it found nothing), ``None`` when none ran. ``reused_from`` names the score an earlier,
    identical request was judged for when that verdict answered this one (no request was made:
    no tokens, no cost; :mod:`tracescorer.scorers.reuse`). ``cached_tokens`` are the input tokens
    the provider read from its prompt cache, ``cache_write_tokens`` those it wrote to it (both
    included in ``input_tokens`` and priced by litellm as the provider bills them; None for none).
    """

    step: str
    model: str
    prompt: str
    raw_output: str | None = None
    output: Any = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None
    attempts: int = 1
    duration_ms: float = 0.0
    status: Literal["ok", "error"] = "ok"
    error: str | None = None
    error_type: str | None = None
    structured_output: Literal["native", "prompt", "none"] = "none"
    input_processors: tuple[str, ...] = ()
    redactions: Mapping[str, int] | None = None
    reused_from: str | None = None


@stored_through_slots
@dataclass(frozen=True, kw_only=True, slots=True)
class ScorerResult:
    """The outcome of one scorer run.

    ``status`` is ``ok`` (``score`` set), ``not_scorable`` (a step returned
    :func:`not_scorable`; ``reason`` says why, ``score`` is ``None``) or ``error`` (only on the
    partial result carried by :class:`~tracescorer.scorers.errors.ScorerRunError`; ``score`` is
    kept when ``generate_score`` completed before the failure).
    The ``*_prompt`` fields hold each prompt step's prompt as sent to the judge (after input
    processors), ``None`` for steps that sent nothing.
    """

    scorer_id: str
    scorer_name: str
    run_id: str
    status: ResultStatus
    score: float | None = None
    reason: str | None = None
    preprocess_step_result: Any = None
    analyze_step_result: Any = None
    preprocess_prompt: str | None = None
    analyze_prompt: str | None = None
    generate_score_prompt: str | None = None
    generate_reason_prompt: str | None = None
    judge_calls: tuple[JudgeCall, ...] = ()
    duration_ms: float = 0.0
    error: str | None = None
    run: ScorerRun[Any, Any] | None = None

    @property
    def judge_model(self) -> str | None:
        """The model of the last judge call (``None`` for code-only scorers)."""
        return self.judge_calls[-1].model if self.judge_calls else None

    @property
    def judge_input_tokens(self) -> int | None:
        known = [c.input_tokens for c in self.judge_calls if c.input_tokens is not None]
        return sum(known) if known else None

    @property
    def judge_output_tokens(self) -> int | None:
        known = [c.output_tokens for c in self.judge_calls if c.output_tokens is not None]
        return sum(known) if known else None

    @property
    def judge_cost_usd(self) -> float | None:
        """Total judge cost; ``None`` when no call had a known cost."""
        known = [c.cost_usd for c in self.judge_calls if c.cost_usd is not None]
        return sum(known) if known else None

    @property
    def judge_attempts(self) -> int:
        return sum(c.attempts for c in self.judge_calls)

    @property
    def judge_reused(self) -> int:
        """Judge calls answered by an earlier verdict (:attr:`JudgeCall.reused_from`)."""
        return sum(1 for c in self.judge_calls if c.reused_from is not None)

    @property
    def redacted(self) -> bool:
        """True when every judge call of this run went through a redacting input processor
        (``False`` for code-only scorers and when any call was sent unredacted)."""
        return bool(self.judge_calls) and all(c.redactions is not None for c in self.judge_calls)

    @property
    def redactions(self) -> dict[str, int]:
        """Items redacted across the judge calls, by kind."""
        total: dict[str, int] = {}
        for call in self.judge_calls:
            for kind, count in (call.redactions or {}).items():
                total[kind] = total.get(kind, 0) + count
        return total


def check_score(value: object) -> float:
    """A finite real number as ``float``, else TypeError/ValueError (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"generate_score must produce a number, got {type(value).__name__}: {value!r:.80}")
    score = float(value)
    if not math.isfinite(score):
        raise ValueError(f"generate_score produced a non-finite score: {score}")
    return score


@runtime_checkable
class ScorerLike(Protocol):
    """What the registry and :func:`run_evals` need from a scorer.

    ``run`` is a coroutine; it returns a :class:`ScorerResult` or raises
    :class:`~tracescorer.scorers.errors.ScorerRunError`. It must be safe to call concurrently.
    """

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    def run(self, run: Any) -> Awaitable[ScorerResult]: ...
