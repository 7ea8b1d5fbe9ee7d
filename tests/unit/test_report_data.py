"""The report's figures from a real DuckDB file (read-only, as `report` opens it when no daemon runs)."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

from tracescorer.model import AgentRun, Message, Part
from tracescorer.records.scores import ScoreRecord
from tracescorer.report import collect, render
from tracescorer.report.data import bucket_for
from tracescorer.store.duckdb import DuckDBStore, open_read_only, run_read_query
from tracescorer.store.queries import Query


def _msg(role: str, text: str) -> Message:
    return Message(role=role, content=text, parts=(Part(type="text", content=text),))


def _run(i: int, conversation: str, user: str, answer: str) -> AgentRun:
    return AgentRun(
        run_id=f"run-{i}",
        trace_id=f"{i:032x}",
        span_id=f"{i:016x}",
        parent_span_id=None,
        conversation_id=conversation,
        resource_id=None,
        agent_name="bot",
        agent_id=None,
        service_name="svc",
        convention="genai",
        model="m",
        started_at=i,
        ended_at=i + 1,
        status="ok",
        error=None,
        input_messages=(_msg("user", user),),
        output=(_msg("assistant", answer),),
    )


def _score(
    i: int,
    scorer: str,
    value: float | None,
    *,
    label: str | None = None,
    status: str = "ok",
    conversation: str | None = None,
    run: str | None = None,
) -> ScoreRecord:
    return ScoreRecord(
        id=f"s{i}",
        scorer_id=scorer,
        scorer_name=scorer,
        run_id=run,
        trace_id=f"{i:032x}",
        span_id=None,
        conversation_id=conversation,
        entity_type="conversation" if conversation else "agent",
        entity_id="bot",
        source="live",
        score=value,
        reason=f"reason {i}",
        status=status,
        error="boom" if status == "error" else None,
        label=label,
        threshold=0.5 if label else None,
        judge_cost_usd=0.01,
    )


def _build(path: Path) -> None:
    asyncio.run(_write(path))


async def _write(path: Path) -> None:
    store = DuckDBStore(path)
    await store.start()
    runs = [
        _run(1, "c1", "first question", "first answer"),
        _run(2, "c1", "second question", "second answer"),
        _run(3, "c2", "other", "reply"),
    ]
    scores = [
        _score(1, "judge", 0.0, label="fail", conversation="c1"),
        _score(2, "judge", 1.0, label="pass", conversation="c2"),
        _score(3, "judge", 0.9, label="pass", conversation="c3"),
        _score(4, "judge", None, status="error", conversation="c4"),
        _score(5, "code", 0.25, run="run-3"),
        _score(6, "code", 0.75, run="run-1"),
    ]
    await store.upsert_runs(runs)
    await store.write_scores(scores, [])
    await store.stop()


def test_collect_summarises_bins_and_picks_the_worst_with_transcripts(tmp_path):
    path = tmp_path / "r.duckdb"
    _build(path)
    con = open_read_only(path)

    def query(q: Query, max_rows: int) -> dict:
        r = run_read_query(con, q.sql, max_rows=max_rows, timeout_s=10, params=q.params)
        return {"columns": r.columns, "rows": r.rows, "truncated": r.truncated}

    now = dt.datetime.now(dt.UTC)
    report = collect(
        query,
        since=now - dt.timedelta(days=7),
        until=now + dt.timedelta(minutes=1),
        scorer_id=None,
        configured=["judge", "code", "unused"],
        worst=2,
        source="test",
    )
    con.close()
    judge, code, unused = (next(s for s in report.scorers if s.scorer_id == i) for i in ("judge", "code", "unused"))
    assert (judge.n, judge.ok, judge.errors, judge.passed, judge.failed) == (4, 3, 1, 2, 1)
    assert judge.pass_rate == 2 / 3 and abs((judge.mean or 0) - 1.9 / 3) < 1e-9 and judge.cost_usd == 0.04
    assert [b.n for b in judge.bins] == [1, 0, 0, 0, 0, 0, 0, 0, 0, 2]
    assert (judge.bins[0].lo, judge.bins[-1].hi) == (0.0, 1.0)
    assert sum(p.n for p in judge.trend) == 4
    worst = judge.worst
    assert [w.score for w in worst] == [0.0, 0.9]
    assert [(t.role, t.text) for t in worst[0].transcript] == [
        ("user", "first question"),
        ("assistant", "first answer"),
        ("user", "second question"),
        ("assistant", "second answer"),
    ]
    assert [w.score for w in code.worst] == [0.25, 0.75]
    assert [t.text for t in code.worst[0].transcript] == ["other", "reply"]  # the run itself, not its conversation
    assert unused.n == 0 and not unused.worst
    html = render(report)
    assert html.count('<section class="scorer"') == 3 and "first answer" in html


def test_trend_buckets_stay_within_sixty_points():
    assert bucket_for(3600) == 60 and bucket_for(86400) == 1800 and bucket_for(7 * 86400) == 3 * 3600
    assert bucket_for(365 * 86400) == 7 * 86400
