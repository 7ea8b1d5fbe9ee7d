"""Whether a binding scores a target: filter → sample → budget, as a pure function.

:func:`decide` reads nothing but its arguments (the budget's state comes in as a flag), so the
same target always gets the same answer for the same binding and budget; the runner records the
decisions that end here and queues the targets that get :attr:`Decision.RUN`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from tracescorer.filters import check_clauses
from tracescorer.runner.bindings import BoundScorer
from tracescorer.runner.targets import Target
from tracescorer.sampling import is_sampled, sample_value


class Decision(StrEnum):
    """What became of one (binding, target); the values are the ``scoring_decisions.decision`` column."""

    SCORED = "scored"
    SAMPLED_OUT = "sampled_out"
    FILTERED_OUT = "filtered_out"
    NOT_SCORABLE = "not_scorable"
    RATE_LIMITED = "rate_limited"
    BUDGET_EXHAUSTED = "budget_exhausted"
    FAILED = "failed"
    GATED = "gated"  # scorers[].when: the gate binding's score on the target did not call for it
    RUN = "run"  # the decider's verdict "score it": never stored, the scorer's outcome is


@dataclass(frozen=True, slots=True)
class Verdict:
    decision: Decision
    detail: str | None = None


def decide(
    bound: BoundScorer,
    target: Target,
    *,
    budget_exhausted: bool,
    budget_detail: str = "",
    extra_check: Callable[[Target], str | None] | None = None,
) -> Verdict:
    """The binding's filter (and ``extra_check``, e.g. a backfill's ``--filter``), then its sampling
    ratio on the target's sample key, then — for judge-using scorers — the daily budget: the global
    one, or the binding's own cap (``budget_detail`` names which)."""
    clause = (check_clauses(bound.clauses, target.subject) if bound.clauses else None) or (
        extra_check(target) if extra_check else None
    )
    if clause is not None:
        return Verdict(Decision.FILTERED_OUT, clause)
    ratio = bound.binding.sampling.ratio
    if ratio != 1.0 and not is_sampled(target.sample_key, ratio):  # every value is below a ratio of 1
        return Verdict(Decision.SAMPLED_OUT, f"sample value {sample_value(target.sample_key):.4f} >= ratio {ratio:g}")
    if bound.uses_judge and budget_exhausted:
        return Verdict(Decision.BUDGET_EXHAUSTED, budget_detail or "daily judge budget spent")
    return _RUN


_RUN = Verdict(Decision.RUN)


def outcome(status: str) -> Decision:
    """The decision a stored score's status amounts to."""
    return _OUTCOMES.get(status, Decision.FAILED)


_OUTCOMES = {"ok": Decision.SCORED, "not_scorable": Decision.NOT_SCORABLE}
