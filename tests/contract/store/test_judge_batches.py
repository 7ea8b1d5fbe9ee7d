"""Batch mode (``mode: batch``) through the scoring runner, on both engines, against the fake
OpenAI Batch API: targets are scored from one provider batch at half the live price; a batch in
flight when the runner stops is polled by the next runner, not submitted again (also when the
stop came between the provider's accepting it and its being recorded); past ``max_wait_s`` the
request goes live; a batch line answered 503 is a transient error row. And the store's
``judge_batches`` rows round-trip."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import pytest
from fakes.fake_openai import FakeOpenAI, Reply
from support.records import numbered_run

from tracescorer.config import Settings
from tracescorer.metrics import Metrics
from tracescorer.records.judge_batches import JudgeBatchRecord
from tracescorer.records.scores import ScoreRecord
from tracescorer.runner.bindings import build_bindings
from tracescorer.runner.decider import Decision
from tracescorer.runner.stage import ScoringRunner
from tracescorer.runner.targets import run_target

VERDICT = Reply.json({"satisfied": True, "reasoning": "answered"})


async def test_batch_rows_round_trip_and_closed_ones_are_not_open(any_store):
    scores = any_store.scores
    intent = JudgeBatchRecord(id="tsb-1", model="openai/m", status="intent", request_keys=("a", "b"), created_at=5.0)
    await scores.put_judge_batch(intent)
    await scores.put_judge_batch(dataclasses.replace(intent, id="tsb-2", status="closed"))
    assert await scores.open_judge_batches() == [intent]
    submitted = dataclasses.replace(intent, status="submitted", provider_batch_id="batch_9")
    await scores.put_judge_batch(submitted)
    assert await scores.open_judge_batches() == [submitted]


class _Told:
    def __init__(self) -> None:
        self.rows: list[ScoreRecord] = []

    def on_scores(self, scores: list[ScoreRecord]) -> None:
        self.rows.extend(scores)


def _runner(stores: Any, fake: FakeOpenAI, tmp_path: Any, **batch: Any) -> tuple[ScoringRunner, _Told]:
    settings = Settings.model_validate(
        {
            "store": {"path": str(tmp_path / "unused.duckdb")},
            "judge": {
                "model": "openai/gpt-4o-mini",
                "api_base": fake.base_url,
                "api_key": "k",
                "retries": 0,
                "batch": {"collect_s": 0.2, "poll_s": 0.05, **batch},
            },
            "scoring": {"recover_window_s": 0},
            "scorers": [
                {
                    "id": m,
                    "prebuilt": "multi_turn_judge",
                    "options": {"criterion": "helpful"},
                    "reuse": False,
                    "mode": m,
                }
                for m in ("batch", "live")
            ],
        }
    )
    runner = ScoringRunner(
        build_bindings(settings.scorers, settings.judge), stores.runs, stores.scores, Metrics(), settings
    )
    told = _Told()
    runner.add_score_listener(told)
    return runner, told


async def _wait(condition: Any, what: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def test_targets_are_scored_from_one_batch_at_half_the_live_price(any_store, tmp_path):
    with FakeOpenAI() as fake:
        fake.script("Criterion:", VERDICT)
        fake.batches.results_after_polls = 3
        runner, told = _runner(any_store, fake, tmp_path)
        await runner.start_workers()
        batch, live = runner.binding("batch"), runner.binding("live")
        try:
            decided = [runner.decide(batch, run_target(numbered_run(i)), "live") for i in range(3)]
            assert await asyncio.gather(*decided) == [Decision.SCORED] * 3
            assert await runner.decide(live, run_target(numbered_run(0)), "live") == Decision.SCORED
            await runner.flush()
        finally:
            await runner.stop(time.monotonic() + 10)
        assert fake.batches.created == 1 and fake.batches.polls == {"batch_1": 3}
        assert fake.attempts(lambda r: r.path == "batch:batch_1") == 3
        assert fake.attempts(lambda r: r.path.endswith("/chat/completions")) == 1  # the live binding only
    by = {(r.scorer_id, r.run_id): r for r in told.rows}
    assert all(by[("batch", f"run-{i}")].status == "ok" and by[("batch", f"run-{i}")].score == 1.0 for i in range(3))
    batched, asked = by[("batch", "run-0")], by[("live", "run-0")]
    assert batched.judge_attempts == 1 and batched.judge_cost_usd and asked.judge_cost_usd
    assert batched.judge_cost_usd == pytest.approx(asked.judge_cost_usd / 2)  # gpt-4o-mini's batch rates
    assert runner.budget.spent_usd == pytest.approx(batched.judge_cost_usd * 3 + asked.judge_cost_usd)
    assert await any_store.scores.open_judge_batches() == []


@pytest.mark.parametrize("lost", ["nothing", "the submitted record"])
async def test_a_batch_in_flight_at_a_stop_is_polled_by_the_next_runner_not_submitted_again(any_store, tmp_path, lost):
    with FakeOpenAI() as fake:
        fake.script("Criterion:", VERDICT)
        fake.batches.hold = True
        runner, _ = _runner(any_store, fake, tmp_path)
        await runner.start_workers()
        target = run_target(numbered_run(1))
        pending = runner.decide(runner.binding("batch"), target, "live")
        await _wait(lambda: fake.batches.created == 1, "the batch")
        await _wait(lambda: fake.batches.polls["batch_1"] >= 1, "a poll")  # recorded as submitted by then
        assert await runner.stop(time.monotonic() + 10) is False  # the target waiting for it is abandoned
        assert isinstance(pending, asyncio.Future) and pending.cancelled()
        [record] = await any_store.scores.open_judge_batches()
        assert record.status == "submitted" and record.provider_batch_id == "batch_1"
        if lost == "the submitted record":  # stopped after the provider took it, before it was recorded
            await any_store.scores.put_judge_batch(dataclasses.replace(record, status="intent", provider_batch_id=None))

        fake.batches.hold = False
        runner, told = _runner(any_store, fake, tmp_path)
        await runner.start_workers()
        try:
            assert await runner.decide(runner.binding("batch"), target, "recovery") == Decision.SCORED
            await runner.flush()
        finally:
            await runner.stop(time.monotonic() + 10)
        assert fake.batches.created == 1 and fake.batches.uploads == 2  # the input file, and the output
        assert fake.attempts() == 1  # one line answered, no live request
    [row] = told.rows
    assert row.status == "ok" and row.judge_cost_usd
    assert await any_store.scores.open_judge_batches() == []


async def test_past_max_wait_the_request_goes_live_and_the_batch_is_cancelled(any_store, tmp_path):
    with FakeOpenAI() as fake:
        fake.script("Criterion:", VERDICT)
        fake.batches.hold = True
        runner, told = _runner(any_store, fake, tmp_path, max_wait_s=0.5)
        await runner.start_workers()
        try:
            assert await runner.decide(runner.binding("batch"), run_target(numbered_run(1)), "live") == Decision.SCORED
            await runner.flush()
        finally:
            await runner.stop(time.monotonic() + 10)
        assert fake.batches.batches["batch_1"]["status"] == "cancelled"
        assert fake.attempts(lambda r: r.path.endswith("/chat/completions")) == 1
    [row] = told.rows
    assert row.status == "ok" and row.judge_cost_usd  # the live price
    assert await any_store.scores.open_judge_batches() == []


async def test_a_batch_line_answered_503_is_a_transient_error_the_healer_takes(any_store, tmp_path):
    with FakeOpenAI() as fake:
        fake.script("Criterion:", Reply.server_error(503))
        runner, told = _runner(any_store, fake, tmp_path)
        await runner.start_workers()
        try:
            assert await runner.decide(runner.binding("batch"), run_target(numbered_run(1)), "live") == Decision.FAILED
            await runner.flush()
        finally:
            await runner.stop(time.monotonic() + 10)
        assert fake.attempts(lambda r: r.path.endswith("/chat/completions")) == 0
    [row] = told.rows
    assert row.status == "error" and row.error_class == "transient", row
