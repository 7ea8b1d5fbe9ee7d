"""The scoring runner on a real DuckDB file: queue overflow, limits, error rows."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest
from support.clock import ManualClock
from support.db import fetch

from tracescorer.config import Settings
from tracescorer.metrics import Metrics
from tracescorer.model import AgentRun, Message, Part
from tracescorer.runner.bindings import build_bindings
from tracescorer.runner.decider import Decision
from tracescorer.runner.limits import DailyBudget, RateLimiter
from tracescorer.runner.stage import ScoringRunner
from tracescorer.runner.targets import run_target
from tracescorer.store.duckdb import DuckDBStore


def _run(i: int) -> AgentRun:
    return AgentRun(
        run_id=f"run-{i}",
        trace_id=f"{i:032x}",
        span_id=f"{i:016x}",
        parent_span_id=None,
        conversation_id=None,
        resource_id=None,
        agent_name="a",
        agent_id=None,
        service_name="svc",
        convention="genai",
        model="m",
        started_at=i,
        ended_at=i + 1,
        status="ok",
        error=None,
        output=(Message(role="assistant", content=f"answer {i}", parts=(Part(type="text", content=f"answer {i}"),)),),
    )


def _settings(tmp_path, **scoring) -> Settings:
    return Settings.model_validate(
        {
            "store": {"path": str(tmp_path / "r.duckdb")},
            "scoring": {"recover_window_s": 0, **scoring},
            "scorers": [
                {"id": "non-empty", "prebuilt": "non_empty_response"},
                {"id": "boom", "python": "contract.scoring_runner.test_runner:exploding"},
            ],
        }
    )


def exploding():  # a user scorer whose step raises: must become an error row, not a crash
    from tracescorer import create_scorer

    def score(*, run, results):
        raise RuntimeError("scorer bug")

    return create_scorer(id="boom", description="always fails").generate_score(score)


@pytest.fixture
async def store(tmp_path):
    s = DuckDBStore(tmp_path / "r.duckdb")
    await s.start()
    yield s
    await s.stop()


async def _rows(store, sql):
    return await fetch(store, sql)


async def test_live_runs_pass_a_full_queue_other_sources_are_rate_limited_and_errors_become_rows(tmp_path, store):
    settings = _settings(tmp_path, max_queue=2, workers=1)
    runner = ScoringRunner(build_bindings(settings.scorers, settings.judge), store, store, Metrics(), settings)
    await runner.start()
    # 12 live targets into a queue of 2: the feed holds intake back (backlog()), so the runs of
    # traces already assembled are queued past the limit rather than dropped
    runner.on_runs([_run(i) for i in range(6)])
    assert runner.backlog() is not None
    late = runner.bindings[0]
    assert runner.decide(late, run_target(_run(99)), "recovery") == Decision.RATE_LIMITED
    await runner.stop(time.monotonic() + 10)
    decisions = dict(await _rows(store, "SELECT decision, count(*) FROM scoring_decisions GROUP BY ALL"))
    assert decisions.pop("rate_limited") == 1
    assert sum(decisions.values()) == 12  # every live (binding, target) has a decision, none silent
    errors = await _rows(store, "SELECT error, error_type, status FROM scores WHERE scorer_id = 'boom'")
    assert errors and all(e[2] == "error" and e[1] == "RuntimeError" and "scorer bug" in e[0] for e in errors)
    failed = await _rows(
        store, "SELECT count(*) FROM scoring_decisions WHERE scorer_id = 'boom' AND decision = 'failed'"
    )
    assert failed[0][0] == len(errors)


async def test_rate_limiter_spaces_requests():
    clock = ManualClock()
    waits: list[float] = []

    async def sleep(seconds: float) -> None:  # the wait passes on the clock, at once
        waits.append(seconds)
        clock.advance(seconds)

    limiter = RateLimiter(60, clock=clock.monotonic, sleep=sleep)  # one token a second, bucket of 60
    for _ in range(60):
        await limiter.acquire()
    assert waits == []  # a full bucket
    for _ in range(3):
        await limiter.acquire()
    assert waits == [1.0, 1.0, 1.0]  # empty: a token a second
    clock.advance(10)  # idle: ten tokens back
    for _ in range(10):
        await limiter.acquire()
    await limiter.acquire(2)
    assert waits == [1.0, 1.0, 1.0, 2.0]


def test_daily_budget_rolls_over_at_midnight():
    import datetime as dt

    day = [dt.date(2026, 1, 1)]
    budget = DailyBudget(1.0, spent_today_usd=0.5, today=lambda: day[0])
    budget.add(0.6)
    assert budget.exhausted
    day[0] = dt.date(2026, 1, 2)
    assert not budget.exhausted and budget.spent_usd == 0.0
    assert not DailyBudget(None, spent_today_usd=1e9).exhausted


class _HeldStore:
    """The store, with conversation loads and score writes held until released (each an Event)."""

    def __init__(self, store: DuckDBStore) -> None:
        self._store = store
        self.loading, self.load, self.write = asyncio.Event(), asyncio.Event(), asyncio.Event()
        self.writes = 0  # write attempts

    async def load_conversation(self, conversation_id):
        self.loading.set()
        await self.load.wait()
        return await self._store.load_conversation(conversation_id)

    async def write_scores(self, scores, decisions):
        self.writes += 1
        await self.write.wait()
        await self._store.write_scores(scores, decisions)

    def __getattr__(self, name):
        return getattr(self._store, name)


async def _until(condition, what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.005)


def _turn_and_whole(tmp_path) -> Settings:
    """A run scorer and a conversation scorer, no recovery at start."""
    return Settings.model_validate(
        {
            "store": {"path": str(tmp_path / "r.duckdb")},
            "scoring": {"recover_window_s": 0},
            "scorers": [
                {"id": "turn", "prebuilt": "non_empty_response"},
                {"id": "whole", "prebuilt": "non_empty_response", "scope": "conversation"},
            ],
        }
    )


async def test_a_conversation_that_goes_idle_as_scoring_stops_is_abandoned_not_decided(tmp_path, store):
    # its claim must be released, not finished: finished with no score row, the conversation
    # would stay unscored (seen as a missing conversation score in the scale-out kill -9 test)
    settings = _turn_and_whole(tmp_path)
    turn = dataclasses.replace(_run(1), conversation_id="c-1")
    await store.upsert_runs([turn])
    held = _HeldStore(store)
    runner = ScoringRunner(build_bindings(settings.scorers, settings.judge), held, held, Metrics(), settings)
    await runner.start()
    runner.on_runs([turn])  # scored; its rows wait in the writer, whose write is held
    await _until(lambda: held.writes == 1, "the run's score and decision written")
    idle = asyncio.create_task(runner.conversation_idle("c-1"))
    await held.loading.wait()
    stopping = asyncio.create_task(runner.stop(time.monotonic() + 10))
    await asyncio.sleep(0)  # the stop began (scoring takes no more targets); its writer waits for the held write
    held.load.set()  # the conversation loaded only now
    waiting = runner.writer.waiting
    await _until(lambda: idle.done() or runner.writer.waiting > waiting, "the conversation decided or abandoned")
    held.write.set()
    assert await asyncio.wait_for(idle, 10) is False  # abandoned: its claim is released, due again
    assert await asyncio.wait_for(stopping, 10)
    assert held.writes == 1  # the held write was waited for, not sent again
    decided = await _rows(store, "SELECT scorer_id, target_type, decision FROM scoring_decisions ORDER BY 1")
    assert decided == [("turn", "run", "scored")]  # none for the conversation: the next claim scores it


async def test_a_scoring_that_fails_outside_the_scorer_leaves_an_error_row_the_healer_retries(
    tmp_path, store, monkeypatch
):
    """A bug past the scorer (here in mapping its result to a row) must not finish a conversation
    with nothing stored: an error row (transient: healed like a judge outage) and ``failed``."""
    import tracescorer.runner.stage as stage
    from tracescorer.records.heal import HealPolicy

    settings = _turn_and_whole(tmp_path)

    def broken(*args, **kwargs):
        raise KeyError("a tracescorer bug")

    monkeypatch.setattr(stage, "score_record", broken)
    turn = dataclasses.replace(_run(1), conversation_id="c-1")
    await store.upsert_runs([turn])
    runner = ScoringRunner(build_bindings(settings.scorers, settings.judge), store, store, Metrics(), settings)
    await runner.start()
    try:
        runner.on_runs([turn])
        assert await asyncio.wait_for(runner.conversation_idle("c-1"), 10) is True  # its rows are stored
        await runner.flush()
    finally:
        await runner.stop(time.monotonic() + 10)
    scores = await _rows(
        store,
        "SELECT s.scorer_id, s.status, s.error_type, s.error_class, s.error, d.decision, d.detail "
        "FROM scores s JOIN scoring_decisions d ON d.score_id = s.id ORDER BY 1",
    )
    assert [r[:4] for r in scores] == [
        ("turn", "error", "KeyError", "transient"),
        ("whole", "error", "KeyError", "transient"),
    ]
    for *_, error, decision, detail in scores:
        assert "scoring failed unexpectedly" in error and "a tracescorer bug" in error
        assert (decision, detail) == ("failed", error)
    at_once = HealPolicy(initial_backoff_s=0, max_backoff_s=0)
    due = await store.heal_candidates(["turn", "whole"], at_once, now=time.time(), limit=10)
    assert sorted((c.scorer_id, c.target_type, c.target_id) for c in due) == [
        ("turn", "run", "run-1"),
        ("whole", "conversation", "c-1"),
    ]


async def test_recovery_lists_what_was_left_before_this_start_only(tmp_path, store):
    """A run stored before the start without a decision is recovered; one stored once the runner
    started (assembly of this start) is scored live only, not also by recovery."""
    settings = Settings.model_validate(
        {
            "store": {"path": str(tmp_path / "r.duckdb")},
            "scoring": {"recover_window_s": 3600},
            "scorers": [{"id": "non-empty", "prebuilt": "non_empty_response"}],
        }
    )
    await store.upsert_runs([_run(1)])  # left by the last life: no decision
    scored: list[str] = []

    class Told:
        def on_scores(self, scores):
            scored.extend(s.run_id for s in scores)

    class Listing:
        """The store, noting when recovery's listing was answered."""

        listed = False

        def __getattr__(self, name):
            return getattr(store, name)

        async def unscored_recent(self, *args, **kwargs):
            found = await store.unscored_recent(*args, **kwargs)
            Listing.listed = True
            return found

    runner = ScoringRunner(build_bindings(settings.scorers, settings.judge), store, Listing(), Metrics(), settings)
    runner.add_score_listener(Told())
    await runner.start()
    assert Listing.listed  # before assembly starts (it starts after scoring): nothing of this start in it
    await store.upsert_runs([_run(2)])  # this start's assembly stores a run, and hands it on
    runner.on_runs([_run(2)])
    await _until(lambda: sorted(scored) == ["run-1", "run-2"], "both runs scored")
    assert await runner.stop(time.monotonic() + 10)
    assert sorted(scored) == ["run-1", "run-2"]  # run-1 by recovery, run-2 live: none twice
