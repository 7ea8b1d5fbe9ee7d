"""The report's figures from a real DuckDB file (read-only, as `report` opens it when no daemon runs): history
keyed on when what was scored ended, failures and errors apart, transcripts with tool calls."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
from pathlib import Path

from tracescorer.config import Settings
from tracescorer.model import AgentRun, Message, Part
from tracescorer.records.scores import ScoreRecord
from tracescorer.report.data import bucket_for, collect
from tracescorer.report.html import render
from tracescorer.report.transcripts import run_turns
from tracescorer.store.duckdb import DuckDBStore
from tracescorer.store.factory import build_offline_reads


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


def _collect(path: Path, **kwargs):
    """The report's data read as `report` reads it when no daemon runs (the file, read-only)."""
    reads = build_offline_reads(Settings.model_validate({"store": {"path": str(path)}}))
    return asyncio.run(collect(reads, **kwargs))


def test_collect_summarises_bins_and_picks_failures_errors_and_transcripts(tmp_path):
    path = tmp_path / "r.duckdb"
    _build(path)
    now = dt.datetime.now(dt.UTC)
    report = _collect(
        path,
        since=now - dt.timedelta(days=7),
        until=now + dt.timedelta(minutes=1),
        scorer_id=None,
        configured=["judge", "code", "unused"],
        worst=2,
        source="test",
    )
    judge, code, unused = (next(s for s in report.scorers if s.scorer_id == i) for i in ("judge", "code", "unused"))
    assert (judge.n, judge.ok, judge.errors, judge.passed, judge.failed) == (4, 3, 1, 2, 1)
    assert judge.pass_rate == 2 / 3 and abs((judge.mean or 0) - 1.9 / 3) < 1e-9 and judge.cost_usd == 0.04
    assert [b.n for b in judge.bins] == [1, 0, 0, 0, 0, 0, 0, 0, 0, 2]
    assert (judge.bins[0].lo, judge.bins[-1].hi) == (0.0, 1.0)
    assert sum(p.n for p in judge.trend) == 4 and sum(p.errors for p in judge.trend) == 1
    assert [w.score for w in judge.worst] == [0.0]  # the failure only: passes are never "worst"
    assert [w.conversation_id for w in judge.recent_errors] == ["c4"] and judge.recent_errors[0].reason == "boom"
    (first, second) = judge.worst[0].transcript  # the conversation's two runs, each with its trace
    assert (first.run_id, first.trace_id) == ("run-1", f"{1:032x}")
    assert [(t.role, t.text) for t in first.turns + second.turns] == [
        ("user", "first question"),
        ("assistant", "first answer"),
        ("user", "second question"),
        ("assistant", "second answer"),
    ]
    assert [w.score for w in code.worst] == [0.25, 0.75]  # no threshold: the lowest scores
    assert [t.text for r in code.worst[0].transcript for t in r.turns] == ["other", "reply"]  # the run itself
    assert unused.n == 0 and not unused.worst
    html = render(report)
    assert html.count('<section class="scorer"') == 3 and "first answer" in html
    assert "Failures: the 1 lowest of 1" in html and "Errors: the 1 latest of 1" in html
    assert "Lowest 2 scores" in html and "could not be scored" in html


def test_a_scorer_that_never_failed_says_so(tmp_path):
    path = tmp_path / "r.duckdb"

    async def write() -> None:
        store = DuckDBStore(path)
        await store.start()
        await store.write_scores([_score(i, "judge", 1.0, label="pass", conversation=f"c{i}") for i in (1, 2)], [])
        await store.stop()

    asyncio.run(write())
    now = dt.datetime.now(dt.UTC)
    report = _collect(
        path, since=now - dt.timedelta(days=7), until=now, scorer_id=None, configured=[], worst=5, source="t"
    )
    (judge,) = report.scorers
    assert judge.worst == () and judge.failed == 0
    assert "No failures: all 2 labelled scores passed." in render(report)


def test_history_is_keyed_on_when_the_target_ended_and_the_axis_spans_the_data(tmp_path):
    """Scores written now about runs that ended two days ago (a backfill) stay two days ago; six
    minutes of data get buckets of seconds, not one point on a week's axis."""
    path = tmp_path / "r.duckdb"
    ended = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)

    def at(minutes: float) -> int:
        return int((ended + dt.timedelta(minutes=minutes)).timestamp() * 1_000_000)

    async def write() -> None:
        store = DuckDBStore(path)
        await store.start()
        scores = [
            dataclasses.replace(_score(i, "judge", i % 2, label="pass" if i % 2 else "fail"), target_ended_at=at(i / 2))
            for i in range(13)  # 0 .. 6 minutes
        ]
        await store.write_scores(scores, [])
        await store.stop()

    asyncio.run(write())
    report = _collect(
        path,
        since=ended - dt.timedelta(days=7),
        until=ended + dt.timedelta(days=6),
        scorer_id=None,
        configured=[],
        worst=5,
        source="t",
    )
    later = _collect(
        path,
        since=ended + dt.timedelta(days=1),
        until=ended + dt.timedelta(days=6),
        scorer_id=None,
        configured=[],
        worst=5,
        source="t",
    )
    (judge,) = report.scorers
    assert judge.first_at == ended and judge.last_at == ended + dt.timedelta(minutes=6)
    assert report.bucket_s == 10 and report.start == ended and report.end == ended + dt.timedelta(seconds=370)
    assert [p.at for p in judge.trend][:2] == [ended, ended + dt.timedelta(seconds=30)]
    assert len(judge.trend) == 13 and [p.pass_rate for p in judge.trend][:3] == [0.0, 1.0, 0.0]
    assert later.scorers == ()  # written today, about runs that ended before the window


def test_transcripts_show_tool_calls_and_an_empty_answer():
    turns = run_turns(
        {
            "input_messages": json.dumps([{"role": "user", "content": "Where is order 7?"}]),
            "tool_calls": json.dumps(
                [
                    {"name": "track_order", "arguments": {"order": 7}, "result": "in transit"},
                    {"name": "refund", "arguments": {}, "error": "forbidden"},
                ]
            ),
            "output": json.dumps([{"role": "assistant", "content": "", "parts": [{"type": "tool_call"}]}]),
        }
    )
    assert [(t.role, t.tool, t.text, t.failed, t.empty) for t in turns] == [
        ("user", None, "Where is order 7?", False, False),
        ("tool", "track_order", '{"order": 7} → in transit', False, False),
        ("tool", "refund", "{} → error: forbidden", True, False),
        ("assistant", None, "(empty answer)", False, True),
    ]


def test_trend_buckets_stay_within_sixty_points():
    assert bucket_for(360) == 10 and bucket_for(3600) == 60 and bucket_for(86400) == 1800
    assert bucket_for(7 * 86400) == 3 * 3600 and bucket_for(365 * 86400) == 7 * 86400
