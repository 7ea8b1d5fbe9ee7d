"""Score rows remember when what they scored ended (both engines, through the scoring stage's
record mapping), a backfill asks which targets have an error or no score, the healer which
transient error scores are due a re-score, and a PostgreSQL schema from before the column is
upgraded."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time

import psycopg

from tracescorer.config import ScorerBinding
from tracescorer.model import AgentRun, Conversation
from tracescorer.records.heal import HealPolicy
from tracescorer.runner.bindings import BoundScorer
from tracescorer.runner.records import score_record
from tracescorer.runner.targets import conversation_target, run_target, target_score_id
from tracescorer.scorers.prebuilt.quick import create_non_empty_response_check
from tracescorer.scorers.types import ScorerResult
from tracescorer.store.api import HealCandidate

ENDED = dt.datetime(2025, 3, 1, 12, 0, 0, 250000, tzinfo=dt.UTC)


def _run(i: int, ended: dt.datetime) -> AgentRun:
    nanos = int(ended.timestamp()) * 1_000_000_000 + ended.microsecond * 1000
    return AgentRun(
        run_id=f"run-{i}",
        trace_id=f"{i:032x}",
        span_id=f"{i:016x}",
        parent_span_id=None,
        conversation_id="c1",
        resource_id=None,
        agent_name="a",
        agent_id=None,
        service_name="svc",
        convention="genai",
        model="m",
        started_at=nanos - 5_000_000_000,
        ended_at=nanos,
        status="ok",
        error=None,
    )


async def test_a_score_row_holds_when_its_run_or_conversation_ended(any_store):
    first, last = _run(1, ENDED - dt.timedelta(minutes=3)), _run(2, ENDED)
    bound = BoundScorer(
        binding=ScorerBinding(id="s", prebuilt="non_empty_response"),
        scorer=create_non_empty_response_check(),
        uses_judge=False,
    )
    result = ScorerResult(scorer_id="s", scorer_name="S", run_id="run-1", status="ok", score=1.0, reason="fine")
    run_row = score_record(bound, run_target(first), "live", result, None, 0.01)
    conversation = conversation_target(Conversation(conversation_id="c1", runs=(first, last)))
    conversation_row = score_record(bound, conversation, "backfill", result, None, 0.01)
    await any_store.runs.upsert_runs([first, last])
    await any_store.scores.write_scores([run_row, conversation_row], [])
    q = "SELECT entity_type, target_ended_at, updated_at FROM scores ORDER BY entity_type"
    rows = (await any_store.queries.query(q, max_rows=10, timeout_s=10)).dicts()
    times = [r["target_ended_at"] for r in rows]
    assert [r["entity_type"] for r in rows] == ["agent", "conversation"]
    assert times == [ENDED - dt.timedelta(minutes=3), ENDED]  # to the microsecond, in UTC
    assert all(r["updated_at"] > ENDED for r in rows)  # written now

    errored = dataclasses.replace(run_row, status="error", score=None)
    await any_store.scores.write_scores([errored], [])
    ids = [target_score_id("s", "run", "run-1"), target_score_id("s", "run", "run-2"), conversation_row.id]
    assert await any_store.scores.score_statuses(ids) == {ids[0]: "error", conversation_row.id: "ok"}
    assert await any_store.scores.score_statuses([]) == {}


def _bound(scorer_id: str) -> BoundScorer:
    return BoundScorer(
        binding=ScorerBinding(id=scorer_id, prebuilt="non_empty_response"),
        scorer=create_non_empty_response_check(),
        uses_judge=False,
    )


async def test_only_transient_errors_due_and_within_their_attempts_are_candidates(any_store):
    runs = [_run(i, ENDED) for i in range(1, 8)]
    await any_store.runs.upsert_runs(runs)
    ok = ScorerResult(scorer_id="s", scorer_name="S", run_id="run-1", status="ok", score=1.0)
    s, other = _bound("s"), _bound("other")

    def row(bound: BoundScorer, i: int, **changes: object):
        base = score_record(bound, run_target(runs[i - 1]), "live", ok, None, 0.01)
        return dataclasses.replace(base, **changes)

    transient = {"status": "error", "score": None, "error_class": "transient"}
    conversation = score_record(
        s, conversation_target(Conversation(conversation_id="c1", runs=(runs[0],))), "live", ok, None, 0.01
    )
    before = time.time()
    await any_store.scores.write_scores(
        [
            row(s, 1, **transient),  # due after the first backoff
            row(s, 2, **transient, heal_attempts=2),  # two re-scores so far: due after the third
            row(s, 3, **transient, heal_attempts=5),  # every attempt used
            row(s, 4, status="error", score=None, error_class="permanent"),  # a 401: never
            row(s, 5),  # ok: never
            row(other, 6, **transient),  # a scorer not asked about
            row(s, 7, **transient, heal_attempts=4),  # its fifth backoff is max_backoff_s
            dataclasses.replace(conversation, status="error", score=None, error_class="transient"),
        ],
        [],
    )
    written = time.time()  # the rows' updated_at is the store's clock, between before and written
    policy = HealPolicy(max_attempts=5, max_age_s=3600, initial_backoff_s=60, max_backoff_s=600)

    async def due(now: float, *, limit: int = 10) -> list[str]:
        found = await any_store.scores.heal_candidates(["s"], policy, now=now, limit=limit)
        return sorted(c.target_id for c in found)

    # the SQL's backoff is HealPolicy.backoff_s: each row is due once its own wait passed, not before
    for target, attempts in (("c1", 0), ("run-1", 0), ("run-2", 2), ("run-7", 4)):
        wait = policy.backoff_s(attempts)
        assert target not in await due(before + wait - 1), (target, wait)
        assert target in await due(written + wait), (target, wait)
    assert policy.backoff_s(4) == 600
    found = await any_store.scores.heal_candidates(["s"], policy, now=written + 240, limit=10)
    assert sorted(found, key=lambda c: c.target_id) == [
        HealCandidate(conversation.id, "s", "conversation", "c1", 0),
        HealCandidate(row(s, 1).id, "s", "run", "run-1", 0),
        HealCandidate(row(s, 2).id, "s", "run", "run-2", 2),
    ]
    # first stored longer ago than max_age_s: left alone
    assert await due(written + 3601) == []
    assert len(await due(written + 600, limit=1)) == 1
    assert await any_store.scores.heal_candidates([], policy, now=written + 600, limit=10) == []
    off = dataclasses.replace(policy, max_attempts=0)
    assert await any_store.scores.heal_candidates(["s"], off, now=written + 600, limit=10) == []


async def test_a_postgres_schema_from_before_the_column_is_upgraded(pg_dsn, tmp_path):
    from tracescorer.store.postgres.migrations import latest_version, migrate

    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await migrate(conn, "tracescorer")
        await conn.execute("ALTER TABLE tracescorer.scores DROP COLUMN target_ended_at")
        await conn.execute("UPDATE tracescorer.schema_info SET value = '1' WHERE key = 'version'")
        assert await migrate(conn, "tracescorer") == (1, latest_version())
        cur = await conn.execute(
            "SELECT data_type FROM information_schema.columns WHERE table_schema = 'tracescorer' "
            "AND table_name = 'scores' AND column_name = 'target_ended_at'"
        )
        assert await cur.fetchall() == [("timestamp with time zone",)]
