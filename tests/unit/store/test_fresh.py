"""NewTraces: which score and decision rows the DuckDB store may insert without a key lookup."""

from __future__ import annotations

import dataclasses

from tracescorer.records.scores import DecisionRecord, ScoreRecord
from tracescorer.store.duckdb.fresh import NewTraces

T1, T2, T3 = "1" * 32, "2" * 32, "3" * 32


def _score(trace: str, **kw: object) -> ScoreRecord:
    fields: dict[str, object] = {
        "id": "s",
        "scorer_id": "b",
        "scorer_name": "b",
        "run_id": "r",
        "trace_id": trace,
        "span_id": None,
        "conversation_id": None,
        "entity_type": "agent",
        "entity_id": "a",
        "source": "live",
        "score": 1.0,
        "reason": None,
        "status": "ok",
    }
    fields.update(kw)
    return ScoreRecord(**fields)  # type: ignore[arg-type]


def _decision(trace: str, **kw: object) -> DecisionRecord:
    fields: dict[str, object] = {
        "id": "d",
        "scorer_id": "b",
        "target_type": "run",
        "target_id": "r",
        "trace_id": trace,
        "conversation_id": None,
        "decision": "scored",
        "detail": None,
        "sample_rate": 1.0,
        "source": "live",
        "score_id": "s",
    }
    fields.update(kw)
    return DecisionRecord(**fields)  # type: ignore[arg-type]


def test_live_run_rows_of_traces_assembled_for_the_first_time_are_new():
    new = NewTraces(limit=2)
    new.assembled([T1], again=[])
    assert new.score(_score(T1)) and new.decision(_decision(T1))
    assert not new.score(_score(T2)) and not new.decision(_decision(T2))  # never said to be new
    # conversations are re-scored as they grow; backfill re-scores what was scored before
    assert not new.score(_score(T1, entity_type="conversation")) and not new.decision(
        _decision(T1, target_type="conversation")
    )
    assert not new.score(_score(T1, source="backfill")) and not new.decision(_decision(T1, source="backfill"))
    assert not new.score(dataclasses.replace(_score(T1), trace_id=None))
    new.assembled([], again=[T1])  # late items: assembled again, its rows are re-scores
    assert T1 not in new and not new.score(_score(T1))
    new.assembled([T1, T2, T3], again=[])  # bounded: the oldest is forgotten
    assert T1 not in new and T2 in new and T3 in new
