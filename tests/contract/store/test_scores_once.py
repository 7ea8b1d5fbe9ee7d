"""Score rows are written once (both engines): the same rows written again, as a retried batch or a
stop's last write sends them, leave each row as first stored (``updated_at`` = ``created_at``,
``exported_at`` kept, its decisions' ``decided_at`` kept, the judge spend counted once); a new
version of a score (a heal re-score, a new scorer version) still replaces it and is exported again."""

from __future__ import annotations

import dataclasses

from support.db import fetch
from support.records import numbered_run

from tracescorer.config import ScorerBinding
from tracescorer.model import Conversation
from tracescorer.records.deliveries import Claim, DeliveryOutcome
from tracescorer.runner.bindings import BoundScorer
from tracescorer.runner.decider import Decision
from tracescorer.runner.records import decision_record, score_record
from tracescorer.runner.targets import conversation_target, run_target
from tracescorer.scorers.prebuilt.quick import create_non_empty_response_check
from tracescorer.scorers.types import ScorerResult

BOUND = BoundScorer(
    binding=ScorerBinding(id="s", prebuilt="non_empty_response"),
    scorer=create_non_empty_response_check(),
    uses_judge=False,
    version="v1",
)
STAMPS = "SELECT id, created_at, updated_at, exported_at FROM scores ORDER BY id"


def _rows():
    """Score rows as the runner maps them (JSON step results, a judge cost, a conversation score of
    a claim's activity seq), with their decisions."""
    runs = [numbered_run(i, "c1") for i in (1, 2)]
    result = ScorerResult(
        scorer_id="s",
        scorer_name="S",
        run_id="run-1",
        status="ok",
        score=0.1 + 0.2,
        reason="fine",
        analyze_step_result={"facts": [1, 2.5, None], "note": "é"},
    )
    targets = [
        run_target(runs[0]),
        run_target(runs[1]),
        conversation_target(Conversation(conversation_id="c1", runs=tuple(runs)), 7),
    ]
    scores = [score_record(BOUND, t, "live", result, None, 0.0123) for t in targets]
    scores[0] = dataclasses.replace(scores[0], judge_cost_usd=0.25)
    decisions = [
        decision_record(BOUND, t, Decision.SCORED, None, "live", s.id) for t, s in zip(targets, scores, strict=True)
    ]
    return runs, scores, decisions


async def _export_all(stores) -> None:
    """Deliver every due score version to the one sink: its ``exported_at`` is set."""
    due = await stores.deliveries.due_deliveries("otlp", "me", 10)
    claims = [Claim(score_id=d.id, version=d.version) for d in due]
    await stores.deliveries.claim_deliveries("otlp", "me", 30, claims)
    outcomes = [DeliveryOutcome(score_id=d.id, version=d.version, status="delivered", attempts=1) for d in due]
    await stores.deliveries.record_deliveries("otlp", "me", outcomes, ["otlp"])


async def test_the_same_score_rows_written_again_are_left_as_first_stored(any_store):
    stores = any_store
    runs, scores, decisions = _rows()
    # traces assembled for the first time: DuckDB believes their rows new (inserted without a
    # lookup), so the second write meets the keys and is done again without beliefs
    await stores.runs.upsert_runs(runs, new_traces=[r.trace_id for r in runs])
    await stores.scores.write_scores(scores, decisions)
    await _export_all(stores)
    stored = await fetch(stores.queries, STAMPS)
    assert len(stored) == 3 and all(created == updated and exported for _, created, updated, exported in stored)
    decided = await fetch(stores.queries, "SELECT id, decided_at FROM scoring_decisions ORDER BY id")
    spent = await stores.scores.spent_today_usd()

    await stores.scores.write_scores(scores, decisions)  # a retried batch whose first try was committed
    await stores.scores.write_scores(scores + scores[:1], decisions)  # and a batch holding a row twice
    assert await fetch(stores.queries, STAMPS) == stored
    assert await fetch(stores.queries, "SELECT id, decided_at FROM scoring_decisions ORDER BY id") == decided
    assert await stores.scores.spent_today_usd() == spent == 0.25
    assert await stores.deliveries.due_deliveries("otlp", "me", 10) == []  # not exported twice

    # new versions: a heal re-score (one more attempt, its result) and a changed binding's score
    healed = score_record(BOUND, run_target(runs[0]), "live", None, RuntimeError("judge down"), 0.5, 1)
    versioned = dataclasses.replace(scores[1], scorer_version="v2")
    await stores.scores.write_scores([healed, versioned, scores[2]], decisions[:2])
    after = {r[0]: r[1:] for r in await fetch(stores.queries, STAMPS)}
    for new in (healed, versioned):
        created, updated, exported = after[new.id]
        assert updated > created and exported is None, new.id
    assert after[scores[2].id] == stored[[r[0] for r in stored].index(scores[2].id)][1:]
    due = sorted(d.id for d in await stores.deliveries.due_deliveries("otlp", "me", 10))
    assert due == sorted([healed.id, versioned.id])
    assert await fetch(stores.queries, "SELECT id, status, heal_attempts FROM scores WHERE id = ?", healed.id) == [
        (healed.id, "error", 1)
    ]
