"""The :class:`~tracescorer.store.api.Coordination` contract of several daemons on one PostgreSQL
store: conversation claims across owners (exclusive, leases, takeovers, finish and release),
idleness and age, the shared judge token bucket, and the stages that use them (the shared idler,
the shared rate limiter). Two result stores (owners ``a`` and ``b``) on one database. (The worker
processes of one daemon coordinate nothing: each conversation has one owner, see
tests/e2e/test_workers.py.)"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from support.daemon import wait_for_async
from support.db import fetch
from support.postgres import two_daemons

from tracescorer.assembly.idle import SharedIdleConversations
from tracescorer.metrics import Metrics
from tracescorer.model import AgentRun, Message
from tracescorer.runner.limits import SharedRateLimiter

Sql = Callable[[str], Awaitable[None]]


def _run(i: int, conversation: str | None) -> AgentRun:
    return AgentRun(
        run_id=f"run-{i}",
        trace_id=f"{i:032x}",
        span_id=f"{i:016x}",
        parent_span_id=None,
        conversation_id=conversation,
        resource_id=None,
        agent_name="a",
        agent_id=None,
        service_name="svc",
        model="m",
        error=None,
        convention="genai",
        started_at=i,
        ended_at=i + 1,
        status="ok",
        input_messages=(Message(role="user", content=f"q{i}"),),
    )


@pytest.fixture
async def owners(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Any, Any, Sql]]:
    """Two coordinating daemons ``a`` and ``b`` of one PostgreSQL result store, and a way to run a
    statement on it (tests move its clock-stamped columns)."""
    import psycopg

    dsn = request.getfixturevalue("pg_dsn")

    async def pg_sql(sql: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute("SET search_path TO tracescorer")
            con.execute(sql)

    async with two_daemons(dsn) as (a, b):
        yield a, b, pg_sql


CLAIM = {"idle_s": 0, "lease_s": 30, "limit": 10, "max_age_s": 3600}
EXPIRE = "UPDATE conversation_activity SET claimed_until = now() - INTERVAL '1 second'"


async def test_conversations_are_claimed_by_one_owner_and_due_again_after_a_new_turn(owners):
    a, b, sql = owners
    await a.upsert_runs([_run(i, f"c{i % 4}") for i in range(8)])
    got_a, got_b = await asyncio.gather(a.claim_conversations(**CLAIM), b.claim_conversations(**CLAIM))
    ids_a = {c.conversation_id for c in got_a}
    ids_b = {c.conversation_id for c in got_b}
    assert ids_a | ids_b == {"c0", "c1", "c2", "c3"} and not ids_a & ids_b  # each claimed once
    assert {c.seq for c in [*got_a, *got_b]} == {1}  # two runs of each, stored in one write
    assert await a.finish_conversations([(c.conversation_id, c.seq) for c in got_a]) == len(got_a)
    assert await b.finish_conversations([(c.conversation_id, c.seq) for c in got_b], []) == len(got_b)
    assert await a.claim_conversations(**CLAIM) == []  # all scored
    await b.upsert_runs([_run(9, "c1")])  # a new turn, stored by the other client
    again = await a.claim_conversations(**CLAIM)
    assert [c.conversation_id for c in again] == ["c1"] and again[0].seq == 2  # stored twice now
    # a is gone (no renewal): b gets nothing while a's lease lives, and takes it over after
    assert await b.claim_conversations(**CLAIM) == []
    await sql(EXPIRE)
    taken = await b.claim_conversations(**CLAIM)
    assert [(c.conversation_id, c.seq, c.takeover) for c in taken] == [("c1", 2, True)]
    assert await a.finish_conversations([("c1", 2)]) == 0  # a's late finish does not count
    assert await a.renew_conversations(["c1"], 30) == []
    assert await b.renew_conversations(["c1", "c2"], 30) == ["c1"]  # only what b holds
    assert await b.finish_conversations([], release=["c1"]) == 0  # released unscored: due again at once
    assert [c.conversation_id for c in await a.claim_conversations(**CLAIM)] == ["c1"]
    assert await a.conversation_stats() == {"unscored": 1, "claimed": 1, "takeovers": 1}


async def test_a_turn_stored_while_claimed_makes_it_due_again_and_idleness_and_age_count(owners):
    a, b, sql = owners
    await a.upsert_runs([_run(1, "c1"), _run(2, None)])  # a run without a conversation is no activity
    assert await a.claim_conversations(**{**CLAIM, "idle_s": 3600}) == []  # not idle yet
    (claim,) = await a.claim_conversations(**CLAIM)
    await b.upsert_runs([_run(3, "c1")])  # stored while a scores it
    assert await a.finish_conversations([(claim.conversation_id, claim.seq)]) == 1
    assert [(c.conversation_id, c.seq) for c in await b.claim_conversations(**CLAIM)] == [("c1", 2)]
    assert await b.finish_conversations([("c1", 2)]) == 1
    assert await a.claim_conversations(**CLAIM) == [] and await b.claim_conversations(**CLAIM) == []
    assert (await a.conversation_stats())["unscored"] == 0
    # activity older than max_age_s is not due (recovery's window), younger is
    await a.upsert_runs([_run(4, "c2")])
    await sql("UPDATE conversation_activity SET last_activity = last_activity - INTERVAL '2 hours'")
    assert await a.claim_conversations(**CLAIM) == []
    assert [c.conversation_id for c in await a.claim_conversations(**{**CLAIM, "max_age_s": 3 * 3600})] == ["c2"]


async def test_a_lease_runs_out_by_the_store_clock(owners):
    a, b, _ = owners
    await a.upsert_runs([_run(1, "c1")])
    assert len(await a.claim_conversations(**{**CLAIM, "lease_s": 0.5})) == 1
    assert await b.claim_conversations(**CLAIM) == []
    taken = await wait_for_async(lambda: b.claim_conversations(**CLAIM), timeout_s=10, what="the lease to run out")
    assert [(c.conversation_id, c.takeover) for c in taken] == [("c1", True)]


async def test_the_judge_token_bucket_is_shared_and_a_refused_take_takes_nothing(owners):
    a, b, _ = owners
    waits = [await (a if i % 2 else b).take_judge_tokens("judge", 1, 4, 0.5) for i in range(5)]
    assert waits[:4] == [0, 0, 0, 0] and 0 < waits[4] <= 2.1  # four tokens shared, the fifth waits ~2 s
    assert await a.take_judge_tokens("other", 4, 4, 0.5) == 0  # buckets are separate
    # refilled 0.001 a second: 1.5 of 2 taken, a take of 1 is refused (~500 s) and takes nothing
    assert await a.take_judge_tokens("slow", 1.5, 2, 0.001) == 0
    assert 490 < await b.take_judge_tokens("slow", 1, 2, 0.001) <= 500
    assert await a.take_judge_tokens("slow", 0.49, 2, 0.001) == 0
    assert await a.take_judge_tokens("big", 10, 2, 0.001) == 0  # at most the capacity is asked for


async def test_the_token_bucket_refills_at_its_rate(owners):
    a, b, _ = owners
    assert await a.take_judge_tokens("fast", 1, 1, 20) == 0
    wait_s = await b.take_judge_tokens("fast", 1, 1, 20)
    assert 0 < wait_s <= 0.05
    await asyncio.sleep(wait_s + 0.05)
    assert await b.take_judge_tokens("fast", 1, 1, 20) == 0


async def test_the_shared_rate_limit_spans_clients(owners):
    a, b, _ = owners
    # 6 a minute, a bucket of 6: drained by the two clients in turn, it refills 0.1 a second, so
    # however slow this machine, neither can take another token for seconds after
    limiters = [SharedRateLimiter(s, 6) for s in (a, b)]
    for i in range(6):
        await limiters[i % 2].acquire()
    for s in (a, b):  # the bucket is shared: both are told to wait, nothing is taken
        assert await s.take_judge_tokens("judge", 1, 6, 0.1) > 0


class Sink:
    """Scores every conversation it is given (counted), at once."""

    def __init__(self, scored: Counter[str]) -> None:
        self.scored = scored

    async def conversation_idle(self, conversation_id: str, activity_seq: int | None = None) -> bool:
        self.scored[conversation_id] += 1
        return True


async def test_idle_conversations_are_scored_once_across_clients(owners):
    a, b, _ = owners
    scored: Counter[str] = Counter()
    idlers = [
        SharedIdleConversations(
            Sink(scored), s, Metrics(), idle_s=0.2, lease_s=30, interval_s=0.05, max_in_flight=3, max_age_s=3600
        )
        for s in (a, b)
    ]
    for idler in idlers:
        await idler.start()
    try:
        await a.upsert_runs([_run(i, f"c{i % 6}") for i in range(12)])
        await wait_for_async(lambda: len(scored) == 6, what="six conversations scored")
        await b.upsert_runs([_run(20, "c0")])  # a new turn: scored once more
        await wait_for_async(lambda: scored["c0"] == 2, what="c0 scored again")
        await wait_for_async(lambda: _settled(a), what="every claim finished")
        await asyncio.sleep(0.3)  # a few more passes: nothing is due, nothing is scored twice
        assert scored == Counter({"c0": 2, **{f"c{i}": 1 for i in range(1, 6)}})
    finally:
        for idler in idlers:
            await idler.stop(time.monotonic() + 5)


async def _settled(store: Any) -> bool:
    stats = await store.conversation_stats()
    return bool(stats == {"unscored": 0, "claimed": 0, "takeovers": 0})


class HeldSink:
    """Scores a conversation once the test lets each call go (one event per call, in order)."""

    def __init__(self) -> None:
        self.calls: list[asyncio.Event] = []
        self.seqs: list[int | None] = []  # the activity each call's claim was taken at

    async def conversation_idle(self, conversation_id: str, activity_seq: int | None = None) -> bool:
        go = asyncio.Event()
        self.calls.append(go)
        self.seqs.append(activity_seq)
        await go.wait()
        return True


async def _claimed_by(store: Any) -> list[tuple[Any, ...]]:
    return await fetch(store, "SELECT claimed_by, scored_seq, activity_seq FROM conversation_activity")


async def test_a_scoring_whose_claim_was_lost_does_not_finish_the_claim_taken_since(owners):
    """a scores c1 (claim 1); its lease is lost (taken by someone else, then released); a new turn
    comes and a claims c1 again (claim 2) while the first scoring still runs. The first scoring's
    end must not finish claim 2 (marking the newer turn scored before its own scoring ended)."""
    a, _, sql = owners
    sink, metrics = HeldSink(), Metrics()
    idler = SharedIdleConversations(
        sink, a, metrics, idle_s=0, lease_s=3.0, interval_s=0.05, max_in_flight=3, max_age_s=3600
    )
    await idler.start()
    try:
        await a.upsert_runs([_run(1, "c1")])
        await wait_for_async(lambda: len(sink.calls) == 1, what="c1 claimed and being scored")
        await sql("UPDATE conversation_activity SET claimed_by = 'someone-else'")  # a's lease is lost
        await wait_for_async(lambda: _lost(metrics), what="a noticing its claim is lost")
        await sql("UPDATE conversation_activity SET claimed_by = NULL, claimed_until = NULL")
        await a.upsert_runs([_run(2, "c1")])  # a new turn
        await wait_for_async(lambda: len(sink.calls) == 2, what="c1 claimed again and being scored")
        sink.calls[0].set()  # the first scoring ends
        await asyncio.sleep(0.5)  # several passes of the idler: they must leave claim 2 alone
        assert await _claimed_by(a) == [("a", None, 2)]
        assert sink.seqs == [1, 2]  # each scoring's rows name its claim's activity (the newer row wins)
        sink.calls[1].set()
        await wait_for_async(lambda: _rows_are(a, [(None, 2, 2)]), what="claim 2 finished by its own scoring")
    finally:
        await idler.stop(time.monotonic() + 5)


def _lost(metrics: Metrics) -> bool:
    return 'tracescorer_conversation_claims_total{outcome="lost"} 1.0' in metrics.render().decode()


async def _rows_are(store: Any, rows: list[tuple[Any, ...]]) -> bool:
    return await _claimed_by(store) == rows
