"""Export deliveries on a real DuckDB file, past one page of scores: due rows oldest first, the
settled mark advancing over delivered and failed versions (and never over unsettled ones),
re-scores due again, and delivery rows looked up through their index."""

from __future__ import annotations

import time

import duckdb
import pytest

from tracescorer.records.deliveries import Claim, DeliveryOutcome
from tracescorer.records.scores import ScoreRecord
from tracescorer.store.duckdb import deliveries, layout, migrations
from tracescorer.store.duckdb import scores as duckdb_scores
from tracescorer.store.scores import score_values

N = deliveries.PAGE * 2 + 500  # three pages


def _score(i: int, score: float = 0.5) -> ScoreRecord:
    return ScoreRecord(
        id=f"score-{i:05d}",
        scorer_id="s",
        scorer_name="S",
        run_id=None,
        trace_id=f"{i:032x}",
        span_id=f"{i:016x}",
        conversation_id=None,
        entity_type="agent",
        entity_id="a",
        source="live",
        score=score,
        reason="ok",
        status="ok",
    )


def _write(con, scores):
    con.execute("BEGIN")
    duckdb_scores.write_scores(con, [score_values(s) for s in scores], [], [False] * len(scores), [])
    con.execute("COMMIT")


def _record(con, due, status, owner="me", **kw):
    con.execute("BEGIN")
    deliveries.claim(con, "otlp", owner, 30, [Claim(score_id=d.id, version=d.version) for d in due])
    deliveries.record(
        con,
        "otlp",
        owner,
        [DeliveryOutcome(score_id=d.id, version=d.version, status=status, attempts=1, **kw) for d in due],
        ["otlp"],
    )
    con.execute("COMMIT")


@pytest.fixture
def con(tmp_path):
    c = duckdb.connect(str(tmp_path / "d.duckdb"))
    layout.attach(c, tmp_path / "d.duckdb")
    migrations.migrate(c)
    yield c
    c.close()


def test_due_rows_and_the_settled_mark_over_several_pages(con):
    assert deliveries.read_due(con, "otlp", "me", 10) == ([], None)  # no scores yet
    for start in range(0, N, 1000):  # several commits: versions grow with them
        _write(con, [_score(i) for i in range(start, min(N, start + 1000))])
    due, mark = deliveries.read_due(con, "otlp", "me", 10)
    assert [d.id for d in due] == [f"score-{i:05d}" for i in range(10)] and mark == due[0].version

    # deliver most, fail some, leave one pending with a retry far off, let another daemon hold one
    everything, _ = deliveries.read_due(con, "otlp", "me", N, mark=mark)
    assert len(everything) == N
    by_id = {d.id: d for d in everything}
    pending, held = by_id["score-04100"], by_id["score-04200"]
    _record(con, [d for d in everything if d.id not in (pending.id, held.id) and not d.id.endswith("7")], "delivered")
    _record(con, [d for d in everything if d.id.endswith("7")], "failed", error="rejected")
    _record(con, [pending], "pending", error="503", retry_in_s=3600)
    con.execute("BEGIN")
    deliveries.claim(con, "otlp", "other", 3600, [Claim(score_id=held.id, version=held.version)])
    con.execute("COMMIT")

    due, mark2 = deliveries.read_due(con, "otlp", "me", 10, mark=mark)
    assert due == [] and mark2 == pending.version  # everything older is settled; the pending row holds the mark
    assert [d.id for d in deliveries.read_due(con, "otlp", "me", 10, ignore_backoff=True, mark=mark2)[0]] == [
        pending.id
    ]
    # the mark is kept: a fresh full pass agrees with it
    assert deliveries.settled_mark(con, "otlp") == mark2

    time.sleep(0.002)
    _write(con, [_score(5, score=0.9), _score(N)])  # a re-score (a new version) and a new score
    due, mark3 = deliveries.read_due(con, "otlp", "me", 10, mark=mark2)
    assert [(d.id, d.score) for d in due] == [("score-00005", 0.9), (f"score-{N:05d}", 0.5)]
    assert due[0].delivered_version == by_id["score-00005"].version and due[0].attempts == 0
    assert mark3 == pending.version
    exported = con.execute("SELECT count(*) FROM scores WHERE exported_at IS NOT NULL").fetchall()[0][0]
    assert exported == N - 2 - N // 10 - 1  # delivered versions only (score-00005 was re-scored since)


def test_delivery_rows_are_indexed_by_score():
    con = duckdb.connect()
    layout.attach(con, layout.MEMORY)
    migrations.migrate(con)
    names = {
        r[0]
        for r in con.execute("SELECT index_name FROM duckdb_indexes() WHERE table_name = 'score_deliveries'").fetchall()
    }
    assert "score_deliveries_score" in names
