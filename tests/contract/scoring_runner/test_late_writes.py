"""A late score write of a daemon whose conversation claim was lost must not replace the newer
scoring's row: conversation score rows name the activity seq of their claim, and the store keeps
the newer one (PostgreSQL, two runners as two daemons)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from support.db import fetch
from support.postgres import two_daemons
from support.records import numbered_run

from tracescorer.config import Settings
from tracescorer.metrics import Metrics
from tracescorer.model import AgentRun
from tracescorer.records.scores import DecisionRecord, ScoreRecord
from tracescorer.runner.bindings import build_bindings
from tracescorer.runner.stage import ScoringRunner


def _run(i: int) -> AgentRun:
    return numbered_run(i, "c-1")


@pytest.fixture
async def daemons(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Any, Any]]:
    """The stores of daemons ``a`` and ``b`` on one PostgreSQL database (claims exist only there:
    a daemon's worker processes each own their conversations)."""
    async with two_daemons(request.getfixturevalue("pg_dsn")) as (a, b):
        yield a, b


class _HeldWrites:
    """A store whose score writes wait until released (a slow store, a write being retried)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.release = asyncio.Event()
        self.writes = 0

    async def write_scores(self, scores: Any, decisions: Any) -> None:
        self.writes += 1
        await self.release.wait()
        await self._store.write_scores(scores, decisions)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.005)


async def _stored(store: Any) -> list[tuple[Any, ...]]:
    rows = await fetch(store, "SELECT activity_seq, metadata, score, source FROM scores ORDER BY id")
    return [(seq, json.loads(m)["run_ids"] if isinstance(m, str) else m["run_ids"], s, src) for seq, m, s, src in rows]


async def test_a_late_write_of_a_lost_claim_leaves_the_newer_conversation_score(daemons, tmp_path):
    a_store, b_store = daemons
    settings = Settings.model_validate(
        {
            "store": {"path": str(tmp_path / "unused.duckdb")},
            "scoring": {"recover_window_s": 0},
            "scorers": [{"id": "whole", "prebuilt": "non_empty_response", "scope": "conversation"}],
        }
    )
    bound = build_bindings(settings.scorers, settings.judge)
    held = _HeldWrites(a_store)
    a = ScoringRunner(bound, held, held, Metrics(), settings)
    b = ScoringRunner(bound, b_store, b_store, Metrics(), settings)
    await a.start()
    await b.start()
    try:
        await a_store.upsert_runs([_run(1)])
        # a claimed c-1 at activity 1 and scored it; its write hangs (a's claim lapses meanwhile)
        scoring_a = asyncio.create_task(a.conversation_idle("c-1", 1))
        await _until(lambda: held.writes >= 1, "a's score written, held")
        await b_store.upsert_runs([_run(2)])  # a new turn; b claims c-1 at activity 2
        assert await asyncio.wait_for(b.conversation_idle("c-1", 2), 20) is True
        assert await _stored(b_store) == [(2, ["run-1", "run-2"], 1.0, "live")]
        held.release.set()  # a's late write goes through now
        assert await asyncio.wait_for(scoring_a, 20) is True
        assert await _stored(b_store) == [(2, ["run-1", "run-2"], 1.0, "live")]  # b's row stands
        decisions = await fetch(b_store, "SELECT count(*), min(decision) FROM scoring_decisions")
        assert decisions == [(1, "scored")]
        # a row without a seq (a heal, a backfill) replaces and keeps the seq: a late one still loses
        row = (await _records(b_store))[0]
        await b_store.write_scores([dataclasses.replace(row, activity_seq=None, source="heal")], [])
        assert await _stored(b_store) == [(2, ["run-1", "run-2"], 1.0, "heal")]
        late = dataclasses.replace(row, activity_seq=1, score=0.0, metadata={"run_ids": ["run-1"]})
        stale_decision = _decision(late.id, "failed")
        await a_store.write_scores([late], [stale_decision])
        assert await _stored(b_store) == [(2, ["run-1", "run-2"], 1.0, "heal")]
        assert await fetch(b_store, "SELECT decision FROM scoring_decisions") == [("scored",)]
        # in one batch too (a store process coalescing two daemons' writes): the newer one wins
        newer = dataclasses.replace(row, activity_seq=3, source="live")
        await b_store.write_scores([newer, late], [])
        assert await _stored(b_store) == [(3, ["run-1", "run-2"], 1.0, "live")]
    finally:
        await a.stop(time.monotonic() + 10)
        await b.stop(time.monotonic() + 10)


async def _records(store: Any) -> list[ScoreRecord]:
    rows = await fetch(store, "SELECT id, scorer_id, conversation_id, activity_seq FROM scores")
    return [
        ScoreRecord(
            id=r[0],
            scorer_id=r[1],
            scorer_name=r[1],
            run_id="run-2",
            trace_id=None,
            span_id=None,
            conversation_id=r[2],
            entity_type="conversation",
            entity_id="a",
            source="live",
            score=1.0,
            reason=None,
            status="ok",
            metadata={"run_ids": ["run-1", "run-2"]},
            activity_seq=r[3],
        )
        for r in rows
    ]


def _decision(score_id: str, decision: str) -> DecisionRecord:
    # the id the runner gives the conversation's decision (tracescorer.runner.targets.decision_id)
    from tracescorer.runner.targets import stable_id

    return DecisionRecord(
        id=stable_id("decision", "whole", "conversation", "c-1"),
        scorer_id="whole",
        target_type="conversation",
        target_id="c-1",
        trace_id=None,
        conversation_id="c-1",
        decision=decision,
        detail="late",
        sample_rate=1.0,
        source="live",
        score_id=score_id,
    )
