"""The parts of the scoring runner: the pure decider, the worker pool's lifecycle (the OTel batch
processor's cases), the score writer's commit futures, the shared rate limiter on PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from support.daemon import wait_for_async
from support.records import decision_row, score_row

from tracescorer.config import JudgeSettings, ScorerBinding
from tracescorer.model import AgentRun, Message
from tracescorer.records.scores import DecisionRecord, ScoreRecord
from tracescorer.runner.bindings import build_bindings
from tracescorer.runner.decider import Decision, decide, outcome
from tracescorer.runner.limits import SharedRateLimiter
from tracescorer.runner.pool import WorkerPool
from tracescorer.runner.records import decision_record, score_record
from tracescorer.runner.targets import run_target
from tracescorer.runner.writer import ScoreWriter
from tracescorer.sampling import is_sampled


def _run(i: int, agent: str = "support") -> AgentRun:
    return AgentRun(
        run_id=f"run-{i}",
        trace_id=f"{i:032x}",
        span_id=f"{i:016x}",
        parent_span_id=None,
        conversation_id=None,
        resource_id=None,
        agent_name=agent,
        agent_id=None,
        service_name="svc",
        convention="genai",
        model="m",
        started_at=i,
        ended_at=i + 1,
        status="ok",
        error=None,
        output=(Message(role="assistant", content="hi"),),
    )


def _bound(**binding: object):
    fields: dict[str, object] = {"id": "b", "prebuilt": "non_empty_response", **binding}
    return build_bindings([ScorerBinding.model_validate(fields)], JudgeSettings())[0]


def test_the_decider_filters_then_samples_then_checks_the_budget():
    target = run_target(_run(1))
    assert decide(_bound(), target, budget_exhausted=True).decision is Decision.RUN  # code scorers ignore the budget
    filtered = decide(_bound(filter={"agent_name": "billing-*"}), target, budget_exhausted=False)
    assert filtered.decision is Decision.FILTERED_OUT and "billing-*" in (filtered.detail or "")
    sampled = decide(_bound(sampling={"ratio": 0.0}), target, budget_exhausted=False)
    assert sampled.decision is Decision.SAMPLED_OUT and "ratio 0" in (sampled.detail or "")
    extra = decide(_bound(), target, budget_exhausted=False, extra_check=lambda t: "backfill filter")
    assert extra == decide(_bound(), target, budget_exhausted=False, extra_check=lambda t: "backfill filter")
    assert extra.decision is Decision.FILTERED_OUT and extra.detail == "backfill filter"
    assert outcome("ok") is Decision.SCORED and outcome("error") is Decision.FAILED
    assert Decision.SCORED == "scored"  # the stored string


def test_the_decider_agrees_with_the_filter_and_the_sampler():
    """The clauses built once on the binding, and ratio 1 skipping the sample value, decide as
    ``RunFilter.check`` and ``is_sampled`` do."""
    for ratio in (1.0, 0.5, 0.0):
        bound = _bound(filter={"agent_name": "support-*"}, sampling={"ratio": ratio})
        for i, agent in enumerate(("support-a", "billing", "", "support-b") * 4):
            target = run_target(_run(i * 7919, agent))
            clause = bound.binding.filter.check(target.subject)
            extra = decide(bound, target, budget_exhausted=False, extra_check=lambda t: "extra")
            assert (extra.decision, extra.detail) == (Decision.FILTERED_OUT, clause or "extra")  # before sampling
            verdict = decide(bound, target, budget_exhausted=False)
            if clause is not None:
                assert (verdict.decision, verdict.detail) == (Decision.FILTERED_OUT, clause)
            elif is_sampled(target.sample_key, ratio):
                assert verdict.decision is Decision.RUN
            else:
                assert verdict.decision is Decision.SAMPLED_OUT and f"ratio {ratio:g}" in (verdict.detail or "")


def test_score_records_map_results_and_errors():
    bound, target = _bound(threshold=0.5), run_target(_run(2))
    record = score_record(bound, target, "live", None, RuntimeError("boom"), 0.25)
    assert (record.status, record.error, record.error_type, record.duration_ms) == (
        "error",
        "boom",
        "RuntimeError",
        250.0,
    )
    decision = decision_record(bound, target, Decision.FAILED, record.error, "live", record.id)
    assert decision.score_id == record.id and decision.decision == "failed" and decision.target_id == "run-2"


async def test_pool_runs_items_force_flush_waits_and_shutdown_hands_back_what_did_not_finish():
    started: list[int] = []
    release = asyncio.Event()

    async def handle(item: int) -> None:
        started.append(item)
        if item >= 10:
            await release.wait()  # a judge call that hangs
        if item == 3:
            raise RuntimeError("an item failing does not stop its worker")

    pool: WorkerPool[int] = WorkerPool("t", workers=2, max_queue=4, handle=handle)
    assert not pool.submit(0)  # not started: nothing accepted
    pool.start()
    for i in range(4):
        assert pool.submit(i)
    assert await pool.force_flush(5) and sorted(started) == [0, 1, 2, 3]
    assert pool.submit(10) and pool.submit(11)
    await wait_for_async(lambda: pool.in_flight == 2, 5, what="two hanging items running")
    for i in (12, 13, 14, 15):  # two run (hanging), four wait; the queue holds four
        assert pool.submit(i)
    assert not pool.submit(16)  # full: the caller records rate_limited
    assert pool.submit(16, past_limit=True)  # unless the caller bounds what it submits
    assert not await pool.force_flush(0.05)
    t0 = time.monotonic()
    abandoned = await pool.shutdown(0.2)
    assert time.monotonic() - t0 < 2  # bounded although two items never finish
    assert sorted(abandoned) == [10, 11, 12, 13, 14, 15, 16]
    assert not pool.submit(17)  # nothing accepted after shutdown


async def test_pool_workers_let_the_event_loop_in_between_items_that_never_suspend():
    done: list[int] = []

    async def handle(item: int) -> None:  # a code scorer: runs to the end without suspending
        until = time.perf_counter() + 0.0005
        while time.perf_counter() < until:
            pass
        done.append(item)

    pool: WorkerPool[int] = WorkerPool("t", workers=1, max_queue=1000, handle=handle)
    pool.start()
    for i in range(1000):  # at least 0.5 s of work, queued before the worker starts
        assert pool.submit(i)
    seen: list[int] = []
    asyncio.get_running_loop().call_later(0.001, lambda: seen.append(len(done)))
    assert await pool.force_flush(60) and len(done) == 1000
    # an acknowledgement waiting for a turn of the loop got one long before the queue drained
    assert seen and seen[0] < 1000
    await pool.shutdown(1)


class _Store:
    def __init__(self) -> None:
        self.writes: list[tuple[int, int]] = []
        self.fail = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.at_gate = 0  # writes that reached the gate

    async def write_scores(self, scores, decisions) -> None:
        self.at_gate += 1
        await self.gate.wait()
        if self.fail:
            self.fail -= 1
            raise RuntimeError("store down")
        self.writes.append((len(scores), len(decisions)))


def _decision(i: int) -> DecisionRecord:
    return decision_row(i)


def _score(i: int) -> ScoreRecord:
    return score_row(i, run_id=None, judge_cost_usd=0.5)


async def test_writer_batches_rows_and_resolves_commit_futures_in_order_retrying_failures(monkeypatch):
    import tracescorer.runner.writer as writer_module

    monkeypatch.setattr(writer_module, "RETRY_S", 0.01)
    store = _Store()
    heard: list[int] = []

    class Listener:
        def on_scores(self, scores) -> None:
            heard.append(len(scores))

    writer = ScoreWriter(store, [Listener()])  # type: ignore[arg-type]
    assert writer.committed().done()  # nothing pending
    store.gate.clear()
    store.fail = 1
    writer.start()
    writer.add(_decision(1), _score(1))
    first = writer.committed()
    await wait_for_async(lambda: store.at_gate, 5, what="the writer took the batch and waits at the gate")
    writer.add(_decision(2))
    second = writer.committed()
    assert writer.waiting == 3 and writer.uncommitted_cost_usd == 0.5
    store.gate.set()
    await asyncio.wait_for(asyncio.gather(first, second), 5)
    assert sum(d for _, d in store.writes) == 2 and heard == [1] and writer.waiting == 0
    assert await writer.close(1)


async def test_writer_stores_rows_the_store_refuses_as_error_rows_and_the_rest_as_they_are(tmp_path):
    from dataclasses import replace

    from support.db import fetch

    from tracescorer.store.duckdb import DuckDBStore

    store = DuckDBStore(tmp_path / "ts.duckdb")
    await store.start()
    heard: list[ScoreRecord] = []

    class Listener:
        def on_scores(self, scores) -> None:
            heard.extend(scores)

    try:
        writer = ScoreWriter(store, [Listener()])  # type: ignore[arg-type]
        bad = {7, 23}
        for i in range(40):
            score = _score(i)
            if i in bad:  # what a user's step may return: no store holds it
                score = replace(score, analyze_step_result={"n": 2**70}, reason="r\ud800")
            writer.add(replace(_decision(i), score_id=score.id), score)
        writer.add(_decision(99))  # a decision without a score row
        await writer.flush()
        rows = {
            r[0]: r[1:]
            for r in await fetch(store, "SELECT id, status, error_type, error, reason, judge_cost_usd FROM scores")
        }
        assert len(rows) == 40 and writer.waiting == 0
        for i in range(40):
            status, error_type, error, reason, cost = rows[f"s{i}"]
            assert cost == 0.5  # the judge's spend still counts toward the budget
            if i in bad:
                assert (status, error_type, reason) == ("error", "StoreRefused", None)
                assert "the store refused this score row" in error
            else:
                assert (status, error_type, error) == ("ok", None, None)
        decisions = dict(await fetch(store, "SELECT id, decision FROM scoring_decisions"))
        assert len(decisions) == 41 and decisions["d7"] == decisions["d23"] == "failed" and decisions["d8"] == "scored"
        assert sorted(s.id for s in heard) == sorted(rows)  # listeners hear of what was stored
        assert {s.status for s in heard if s.id in ("s7", "s23")} == {"error"}
    finally:
        await store.stop(time.monotonic() + 5)


async def test_a_score_row_whose_error_row_is_refused_too_is_stored_bare_not_dropped(tmp_path):
    """The error row keeps the judge's model and the refusal's text: when the store refuses that
    too, a bare row of ids and plain text is stored, so the target (a conversation whose claim is
    finished once its rows are stored) is never left with no row at all."""
    from dataclasses import replace

    from support.db import fetch

    from tracescorer.store.duckdb import DuckDBStore

    store = DuckDBStore(tmp_path / "ts.duckdb")
    await store.start()
    try:
        writer = ScoreWriter(store)  # type: ignore[arg-type]
        score = replace(_score(1), reason="r\ud800", judge_model="m\ud800", metadata={"model": "m"})
        writer.add(replace(_decision(1), score_id=score.id), score)
        await writer.flush()
        done = writer.committed()
        assert done.done() and writer.waiting == 0
        rows = await fetch(
            store, "SELECT status, error_type, scorer_name, judge_model, judge_cost_usd, error FROM scores"
        )
        assert len(rows) == 1
        status, error_type, name, model, cost, error = rows[0]
        assert (status, error_type, name, model, cost) == ("error", "StoreRefused", "s", None, 0.5)
        assert error.startswith("the store refused this score row") and error.isascii()
        decisions = await fetch(store, "SELECT decision, detail FROM scoring_decisions")
        assert decisions == [("failed", error)]
    finally:
        await store.stop(time.monotonic() + 5)


async def test_shared_rate_limit_spans_daemons(pg_dsn):
    from tracescorer.store.postgres.store import PostgresResultStore

    stores = [PostgresResultStore(pg_dsn, owner=o) for o in ("a", "b")]
    for s in stores:
        await s.start()
    try:
        # 6 a minute, a bucket of 6: drained by the two daemons in turn, it refills 0.1 a second, so
        # however slow this machine, neither daemon can take another token for seconds after
        limiters = [SharedRateLimiter(s, 6) for s in stores]
        for i in range(6):
            await limiters[i % 2].acquire()
        for s in stores:  # the bucket is shared: both are told to wait, nothing is taken
            assert await s.take_judge_tokens("judge", 1, 6, 0.1) > 0
    finally:
        for s in stores:
            await s.stop()


@pytest.mark.parametrize("ok", [True])
async def test_rate_limiter_falls_back_locally_when_the_store_fails(ok):
    class Down:
        async def take_judge_tokens(self, *args: object) -> float:
            raise RuntimeError("PostgreSQL unreachable")

    limiter = SharedRateLimiter(Down(), 60)
    await asyncio.wait_for(limiter.acquire(), 2)  # judging goes on with a local bucket


async def test_writer_says_once_that_writes_fail_and_once_that_they_work_again(monkeypatch, caplog):
    # a full disk fails every try for as long as it lasts: one traceback per second flooded the log
    import tracescorer.runner.writer as writer_module

    monkeypatch.setattr(writer_module, "RETRY_S", 0.01)
    store = _Store()
    store.fail = 5
    writer = ScoreWriter(store)  # type: ignore[arg-type]
    writer.start()
    writer.add(_decision(1), _score(1))
    with caplog.at_level(logging.INFO, logger="tracescorer.runner.writer"):
        await asyncio.wait_for(writer.committed(), 10)
    messages = [r.getMessage() for r in caplog.records if r.name == "tracescorer.runner.writer"]
    assert store.fail == 0 and store.writes == [(1, 1)]
    assert sum("storing scores failed" in m for m in messages) == 1, messages
    assert sum("storing scores works again" in m for m in messages) == 1, messages
    assert await writer.close(5)
