"""The score writer tells decision listeners (coverage monitors) the decision rows as committed,
against a real DuckDB store: a row the store refused is heard as the ``failed`` decision stored
in its place, and a listener without ``on_decisions`` hears only scores."""

from __future__ import annotations

import time
from dataclasses import replace

from support.db import fetch
from support.records import decision_row, score_row

from tracescorer.records.scores import DecisionRecord, ScoreRecord
from tracescorer.runner.writer import ScoreWriter
from tracescorer.store.duckdb import DuckDBStore


class _Scores:
    def __init__(self) -> None:
        self.scores: list[ScoreRecord] = []

    def on_scores(self, scores: list[ScoreRecord]) -> None:
        self.scores.extend(scores)


class _Decisions(_Scores):
    def __init__(self) -> None:
        super().__init__()
        self.decisions: list[DecisionRecord] = []

    def on_decisions(self, decisions: list[DecisionRecord]) -> None:
        self.decisions.extend(decisions)


async def test_decision_listeners_hear_the_decision_rows_as_stored(tmp_path):
    store = DuckDBStore(tmp_path / "ts.duckdb")
    await store.start()
    scores_only, both = _Scores(), _Decisions()
    try:
        writer = ScoreWriter(store, [scores_only, both])
        for i in range(10):
            score = score_row(i, run_id=None)
            if i == 3:  # what a user's step may return: no store holds it
                score = replace(score, analyze_step_result={"n": 2**70})
            writer.add(decision_row(i, score_id=score.id), score)
        writer.add(decision_row(10, decision="filtered_out", detail="agent_name: 'x' is not 'support'"))
        await writer.flush()
        stored = dict(await fetch(store, "SELECT id, decision FROM scoring_decisions"))
        assert {d.id: d.decision for d in both.decisions} == stored
        assert stored["d3"] == "failed" and stored["d10"] == "filtered_out" and stored["d4"] == "scored"
        assert len(both.decisions) == 11 and len(both.scores) == len(scores_only.scores) == 10
    finally:
        await store.stop(time.monotonic() + 5)
