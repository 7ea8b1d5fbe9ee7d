"""Exceptions of the scoring framework.

::

    ScorerError
    ├── ScorerConfigError      a scorer or judge is misconfigured (raised at build or run time)
    ├── ScorerRunError         a step failed; carries the failed step, completed steps, partial result
    └── JudgeError             one judge call failed (wrapped in ScorerRunError by the pipeline)
        ├── JudgeCallError     the provider call failed (after any processor retries)
        └── JudgeOutputError   the judge answered, but not with valid JSON for the schema
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracescorer.scorers.types import JudgeCall, ScorerResult, StepName


class ScorerError(Exception):
    """Base class of every scoring error."""


class ScorerConfigError(ScorerError, ValueError):
    """A scorer, step or judge is misconfigured."""


class JudgeError(ScorerError):
    """A judge call failed. ``calls`` are the records of the requests made for it (two when the
    structured-output fallback ran), ``call`` the last of them (attempts, timing, error)."""

    def __init__(self, message: str, *, call: JudgeCall | None = None, calls: tuple[JudgeCall, ...] = ()) -> None:
        super().__init__(message)
        self.calls: tuple[JudgeCall, ...] = calls or ((call,) if call is not None else ())

    @property
    def call(self) -> JudgeCall | None:
        return self.calls[-1] if self.calls else None


class JudgeCallError(JudgeError):
    """The provider request failed, after any error-processor retries."""


class JudgeOutputError(JudgeError):
    """The judge's reply is not valid JSON, or does not match the output schema (or an output
    processor failed on it)."""

    def __init__(
        self,
        message: str,
        *,
        raw_output: str | None = None,
        call: JudgeCall | None = None,
        calls: tuple[JudgeCall, ...] = (),
        unparsed: bool = False,
    ) -> None:
        super().__init__(message, call=call, calls=calls)
        self.raw_output = raw_output
        self.unparsed = unparsed  # the reply did not parse or validate (not a processor failure)


class ScorerRunError(ScorerError):
    """A scorer step failed.

    Attributes:
        scorer_id: the scorer that failed.
        failed_step: the step that raised (``preprocess``, ``analyze``, ``generate_score``,
            ``generate_reason``), or ``prepare_run``.
        completed_steps: the steps that completed before it, in order.
        steps: every step the scorer defines, in order.
        result: the partial :class:`ScorerResult` (``status="error"``): prompts, step results
            and judge calls made so far.
    The original exception is ``__cause__``.
    """

    def __init__(
        self,
        *,
        scorer_id: str,
        failed_step: StepName | str,
        completed_steps: tuple[str, ...],
        steps: tuple[str, ...],
        result: ScorerResult,
        cause: BaseException,
    ) -> None:
        super().__init__(f"scorer {scorer_id!r} failed in step {failed_step!r}: {type(cause).__name__}: {cause}")
        self.scorer_id = scorer_id
        self.failed_step = failed_step
        self.completed_steps = completed_steps
        self.steps = steps
        self.result = result

    def __reduce__(self) -> tuple[Any, ...]:  # keep pickling (multiprocessing) working
        return (ScorerError, (str(self),))
