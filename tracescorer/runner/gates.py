"""Gated bindings (``scorers[].when``): an expensive judge runs on a target only where a cheaper
binding's score on the same target calls for it.

A gated binding is decided once its gate's decision is recorded: the runner hands it the gate's
decision and score (:func:`gate_refusal`), so it is ``gated`` at once, with the reason, or queued.
Where it is decided on its own (a backfill of it, the healer, restart recovery when its gate was
decided before the stop) its worker reads the gate's stored score first (:func:`stored_refusal`).
"""

from __future__ import annotations

from collections.abc import Sequence

from tracescorer.config.scoring import GateSettings
from tracescorer.runner.bindings import BoundScorer
from tracescorer.runner.targets import Target, score_id
from tracescorer.store.api import ScoreStore


def gate_refusal(when: GateSettings, decision: str, score: float | None) -> str | None:
    """Why a binding gated by ``when`` does not run, given its gate's decision and score on the
    target (None: it runs). The bounds are strict: ``below: 0.5`` runs on 0.4, not on 0.5."""
    if decision != "scored" or score is None:
        return f"{when.scorer} was {decision} on this target: no score to gate on"
    if when.below is not None and not score < when.below:
        return f"{when.scorer} scored {score:g}; this runs only below {when.below:g}"
    if when.above is not None and not score > when.above:
        return f"{when.scorer} scored {score:g}; this runs only above {when.above:g}"
    return None


async def stored_refusal(scores: ScoreStore, bound: BoundScorer, target: Target) -> str | None:
    """:func:`gate_refusal` on the gate's stored score of ``target`` (a binding without a gate runs)."""
    when = bound.binding.when
    if when is None:
        return None
    found = (await scores.scores_of([score_id(when.scorer, target)])).get(score_id(when.scorer, target))
    if found is None:
        return f"{when.scorer} has no score for this target"
    status, score = found
    return gate_refusal(when, "scored" if status == "ok" else status, score)


def first_deciders(bindings: Sequence[BoundScorer]) -> list[BoundScorer]:
    """The bindings to decide on a target directly: all but those gated by another of ``bindings``
    (decided once their gate's decision is recorded)."""
    ids = {b.binding.id for b in bindings}
    return [b for b in bindings if b.binding.when is None or b.binding.when.scorer not in ids]


def dependents(bindings: Sequence[BoundScorer]) -> dict[str, list[BoundScorer]]:
    """The gated bindings of each gate, by the gate's binding id."""
    out: dict[str, list[BoundScorer]] = {}
    for b in bindings:
        if b.binding.when is not None:
            out.setdefault(b.binding.when.scorer, []).append(b)
    return out
