"""Labels, external evaluations, scorer versions and per-scorer spend through the store's protocols,
in both modes (DuckDB file; DuckDB span log with results in PostgreSQL)."""

from __future__ import annotations

import time

import pytest

from tracescorer.config import Settings
from tracescorer.lifecycle import Stages
from tracescorer.metrics import Metrics
from tracescorer.records.labels import EvaluationRecord, LabelRecord, evaluation_id, label_id
from tracescorer.records.scores import ScoreRecord


@pytest.fixture(params=["duckdb", "postgres"])
async def any_store(request, tmp_path):
    from tracescorer.store.factory import build_stores

    store: dict[str, object] = {"path": str(tmp_path / "c.duckdb")}
    if request.param == "postgres":
        store |= {"backend": "postgres", "postgres": {"dsn": request.getfixturevalue("pg_dsn")}}
    stores = build_stores(Settings.model_validate({"store": store}), Metrics(), owner="test-owner", maintenance=False)
    stages = Stages(lambda: time.monotonic() + 30)
    for component in stores.components:
        await stages.enter(component)
    yield stores
    await stages.aclose()


def _label(author: str, value: str | float, at: float, note: str | None = None) -> LabelRecord:
    return LabelRecord(
        id=label_id("run", "run-1", "judge", author),
        target_type="run",
        target_id="run-1",
        scorer_id="judge",
        author=author,
        label=value if isinstance(value, str) else None,
        score=value if isinstance(value, float) else None,
        note=note,
        source="cli",
        labelled_at=at,
        trace_id="a" * 32,
    )


async def _rows(stores, sql: str) -> list[dict]:
    return (await stores.queries.query(sql, max_rows=100, timeout_s=10)).dicts()


async def test_a_newer_label_from_the_same_person_replaces_the_older_one_and_never_the_reverse(any_store):
    now = time.time()
    assert await any_store.labels.write_labels([_label("ann", "pass", now - 60), _label("bob", 0.25, now - 30)]) == 2
    assert await any_store.labels.write_labels([_label("ann", "fail", now, note="missed the refund")]) == 1
    assert await any_store.labels.write_labels([_label("ann", "pass", now - 3600)]) == 0  # older than stored
    # in one batch the most recent label of a person wins, whatever the order
    assert await any_store.labels.write_labels([_label("bob", 0.75, now), _label("bob", 0.5, now - 1)]) == 1
    rows = await _rows(any_store, "SELECT author, label, score, note, source, trace_id FROM labels ORDER BY author")
    assert rows == [
        {
            "author": "ann",
            "label": "fail",
            "score": None,
            "note": "missed the refund",
            "source": "cli",
            "trace_id": "a" * 32,
        },
        {"author": "bob", "label": None, "score": 0.75, "note": None, "source": "cli", "trace_id": "a" * 32},
    ]


async def test_external_evaluations_upsert_by_id_with_their_attributes(any_store):
    def evaluation(score: float) -> EvaluationRecord:
        return EvaluationRecord(
            id=evaluation_id("bedrock-evals", "Helpfulness", "b" * 32, "c" * 16, None),
            name="Helpfulness",
            source="bedrock-evals",
            kind="log_record",
            target_type="run",
            trace_id="b" * 32,
            span_id="c" * 16,
            conversation_id="conv-1",
            response_id=None,
            score=score,
            label="good" if score > 0.5 else "bad",
            explanation="because",
            error_type=None,
            evaluator_version="v7",
            evaluated_at=1_700_000_000.5,
            attributes={"gen_ai.evaluation.name": "Helpfulness", "custom": [1, 2]},
        )

    await any_store.evaluations.write_evaluations([evaluation(0.2)])
    await any_store.evaluations.write_evaluations([evaluation(0.9)])  # sent again: replaces
    rows = await _rows(
        any_store,
        "SELECT name, source, kind, score, label, evaluator_version, EXTRACT(EPOCH FROM evaluated_at) AS at, "
        "attributes, received_at IS NOT NULL AS received FROM evaluations",
    )
    assert len(rows) == 1
    row = rows[0]
    assert (row["name"], row["source"], row["kind"], row["score"], row["label"]) == (
        "Helpfulness",
        "bedrock-evals",
        "log_record",
        0.9,
        "good",
    )
    assert row["evaluator_version"] == "v7" and float(row["at"]) == pytest.approx(1_700_000_000.5)
    assert '"custom"' in row["attributes"] and row["received"]


async def test_scores_keep_their_scorer_version_and_spend_is_summed_per_scorer_today(any_store):
    def score(i: int, scorer: str, cost: float | None, version: str) -> ScoreRecord:
        return ScoreRecord(
            id=f"s{i}",
            scorer_id=scorer,
            scorer_name=scorer,
            scorer_version=version,
            run_id=f"run-{i}",
            trace_id=None,
            span_id=None,
            conversation_id=None,
            entity_type="agent",
            entity_id=None,
            source="live",
            score=1.0,
            reason=None,
            status="ok",
            judge_cost_usd=cost,
        )

    await any_store.scores.write_scores(
        [score(1, "a", 0.25, "v1"), score(2, "a", 0.5, "v2"), score(3, "b", None, "v1"), score(4, "c", 1.0, "v1")], []
    )
    assert await any_store.scores.spent_today_by_scorer(["a", "b"]) == {"a": 0.75}
    assert await any_store.scores.spent_today_by_scorer([]) == {}
    rows = await _rows(any_store, "SELECT id, scorer_version FROM scores ORDER BY id")
    assert [(r["id"], r["scorer_version"]) for r in rows] == [("s1", "v1"), ("s2", "v2"), ("s3", "v1"), ("s4", "v1")]
