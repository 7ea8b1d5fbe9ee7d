"""Restart recovery of scoring: recent targets that some current binding has not decided."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tracescorer.runner.bindings import BoundScorer
from tracescorer.runner.gates import first_deciders
from tracescorer.runner.targets import Target, run_target
from tracescorer.store.api import ScoreStore

log = logging.getLogger(__name__)


class Recovering(Protocol):
    """What recovery needs of the scoring runner (:class:`~tracescorer.runner.stage.ScoringRunner`)."""

    @property
    def bindings(self) -> Sequence[BoundScorer]: ...
    @property
    def conversation_bindings(self) -> Sequence[BoundScorer]: ...
    @property
    def scores(self) -> ScoreStore: ...
    def decide(self, bound: BoundScorer, target: Target, source: str) -> object: ...
    async def score_conversation(
        self, conversation_id: str, source: str, *, bindings: Sequence[BoundScorer] | None = None
    ) -> object: ...


@dataclass(frozen=True, slots=True)
class Recovered:
    """What recovery found: each run target and each conversation with the bindings it lacks."""

    runs: list[tuple[Target, list[BoundScorer]]] = field(default_factory=list)
    conversations: list[tuple[str, list[BoundScorer]]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RecoveryScope:
    """Which targets a runner recovers: with worker processes each recovers the runs of its own
    traces (``owns``, by hex trace id: after its own restart too) and the conversations it owns
    (``owns_conversation``); without, the daemon's runner recovers everything."""

    runs: bool = True
    conversations: bool = True
    owns: Callable[[str], bool] | None = None
    owns_conversation: Callable[[str], bool] | None = None


async def list_unscored(runner: Recovering, window_s: float, scope: RecoveryScope = RecoveryScope()) -> Recovered:
    """The targets of the last ``window_s`` that some current binding has not decided (the daemon
    stopped between assembly and scoring, or shutdown cancelled their scoring). Listed when the runner
    starts, before assembly does: a run this start stores is scored live, never listed here too."""
    if window_s <= 0:
        return Recovered()
    run_bindings = [b for b in runner.bindings if b.binding.scope == "run"] if scope.runs else []
    conv_bindings = runner.conversation_bindings if scope.conversations else []
    if not run_bindings and not conv_bindings:
        return Recovered()
    try:
        pending = await runner.scores.unscored_recent(
            [b.binding.id for b in run_bindings],
            window_s=window_s,
            conversation_scorer_ids=[b.binding.id for b in conv_bindings],
        )
    except Exception:  # recovery is best effort
        log.exception("scoring recovery query failed")
        return Recovered()
    runs = pending.runs if scope.owns is None else [r for r in pending.runs if scope.owns(r.trace_id)]
    conversations = pending.conversation_ids if conv_bindings else []
    if scope.owns_conversation is not None:
        conversations = [c for c in conversations if scope.owns_conversation(c)]
    if runs or conversations:
        log.info("scoring recovery: %d run(s), %d conversation(s) without a decision", len(runs), len(conversations))
    return Recovered(
        [
            (run_target(r), [b for b in run_bindings if b.binding.id not in pending.decided.get(("run", r.run_id), ())])
            for r in runs
        ],
        [
            (c, [b for b in conv_bindings if b.binding.id not in pending.decided.get(("conversation", c), ())])
            for c in conversations
        ],
    )


async def score_recovered(runner: Recovering, recovered: Recovered) -> None:
    """Score what :func:`list_unscored` found (in a task: it waits for queue room)."""
    for target, bindings in recovered.runs:
        for bound in first_deciders(bindings):  # the others: once their gate is decided
            runner.decide(bound, target, "live")
    for cid, missing in recovered.conversations:
        if missing:
            await runner.score_conversation(cid, "live", bindings=missing)
