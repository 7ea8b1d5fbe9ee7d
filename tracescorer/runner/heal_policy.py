"""What heals and when: the class of a scorer error, the backoff between re-scores, and the
verdict on one stored error score. Pure functions; :mod:`tracescorer.runner.heal` acts on them.

Error classes (stored as ``scores.error_class``):

- ``transient``: the judge did not answer usefully *now*: connection refused or reset, timeouts,
  429, 408/409 and 5xx, "overloaded" replies; a scoring that failed outside the scorer
  (:func:`~tracescorer.runner.records.failure_record`). Re-scored automatically.
- ``permanent``: the request is wrong and will fail again: 401/403 (credentials), 400/404/413/422
  (invalid request, unknown model, context too long), a scorer's own code raising. Never re-scored.
- ``output``: the judge answered but its answer could not be used (unparsable JSON, wrong
  schema, an output processor failing). Not re-scored either: the same prompt tends to give the
  same answer, and re-asking spends budget; ``tracescorer backfill --status error`` is the remedy.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tracescorer.records.heal import HealPolicy
from tracescorer.scorers.errors import JudgeOutputError
from tracescorer.scorers.retry import error_chain, is_retryable

TRANSIENT, PERMANENT, OUTPUT = "transient", "permanent", "output"

__all__ = [
    "OUTPUT",
    "PERMANENT",
    "TRANSIENT",
    "HealPolicy",
    "HealState",
    "Verdict",
    "describe",
    "error_class",
    "heal_state",
]


def error_class(error: BaseException | None) -> str | None:
    """The class of a scorer failure (see the module docstring); ``None`` without an error.

    The error and what it wraps are examined outermost first; a judge output error anywhere in
    the chain makes it ``output``; otherwise the first link the provider classification
    (:func:`~tracescorer.scorers.retry.is_retryable`) recognises decides; unrecognised errors
    are ``permanent`` (re-scoring them automatically could spend budget for nothing)."""
    if error is None:
        return None
    chain = error_chain(error)
    if any(isinstance(link, JudgeOutputError) for link in chain):
        return OUTPUT
    for link in chain:
        verdict = is_retryable(link)
        if verdict is not None:
            return TRANSIENT if verdict else PERMANENT
    return PERMANENT


class Verdict(enum.StrEnum):
    DUE = "due"  # re-score now
    WAITING = "waiting"  # backing off
    GAVE_UP = "gave_up"  # every attempt failed
    EXPIRED = "expired"  # the failure is older than max_age_s
    NOT_HEALED = "not_healed"  # not a transient error


@dataclass(frozen=True, kw_only=True, slots=True)
class HealState:
    """What is known of one error score and what comes next: ``due_at`` (epoch s) when waiting."""

    verdict: Verdict
    attempts: int
    due_at: float | None = None


def heal_state(
    policy: HealPolicy,
    *,
    error_class: str | None,
    attempts: int | None,
    failed_at: float,
    first_failed_at: float,
    now: float,
) -> HealState:
    """The verdict on an error score whose last failure was at ``failed_at`` (epoch s) and whose
    first at ``first_failed_at`` (its creation), re-scored ``attempts`` times so far."""
    done = attempts or 0
    if error_class != TRANSIENT:
        return HealState(verdict=Verdict.NOT_HEALED, attempts=done)
    if done >= policy.max_attempts:
        return HealState(verdict=Verdict.GAVE_UP, attempts=done)
    if now - first_failed_at > policy.max_age_s:
        return HealState(verdict=Verdict.EXPIRED, attempts=done)
    due_at = failed_at + policy.backoff_s(done)
    return HealState(verdict=Verdict.DUE if due_at <= now else Verdict.WAITING, attempts=done, due_at=due_at)


def describe(state: HealState, policy: HealPolicy, *, now: float) -> str:
    """``retry 2 of 5 due in 1m``, ``gave up after 5 attempts``: the heal state in words (explain)."""
    if state.verdict is Verdict.GAVE_UP:
        return f"gave up after {state.attempts} automatic retr{'y' if state.attempts == 1 else 'ies'}"
    if state.verdict is Verdict.EXPIRED:
        return f"not retried: older than scoring.heal.max_age_s ({policy.max_age_s:g}s)"
    if state.verdict is Verdict.NOT_HEALED:
        return "not retried automatically (not a transient error)"
    nth = f"retry {state.attempts + 1} of {policy.max_attempts}"
    if state.verdict is Verdict.DUE or state.due_at is None:
        return f"{nth} due now"
    return f"{nth} due in {_duration(state.due_at - now)}"


def _duration(seconds: float) -> str:
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s" if s % 60 else f"{s // 60}m"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"
