"""Labels, external evaluations, scorer versions and per-scorer spend through the store's protocols,
in both modes (DuckDB file; DuckDB span log with results in PostgreSQL)."""

from __future__ import annotations

import dataclasses
import time

import pytest

from tracescorer.records.labels import EvaluationRecord, LabelRecord, evaluation_id, label_id
from tracescorer.records.scores import ScoreRecord


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


async def test_the_calibration_reads_run_on_either_engine_and_resolve_evaluations_to_runs(any_store):
    import datetime as dt

    from tracescorer.conventions.base import run_id_for
    from tracescorer.model import AgentRun

    trace = "d" * 32

    def run(span: str, parent: str | None) -> AgentRun:
        return AgentRun(
            run_id=run_id_for(trace, span),
            trace_id=trace,
            span_id=span,
            parent_span_id=parent,
            conversation_id="conv-9",
            resource_id=None,
            agent_name=f"agent-{span[:2]}",
            agent_id=None,
            service_name="svc",
            model=None,
            error=None,
            convention="genai",
            started_at=1 if parent is None else 2,
            ended_at=3,
            status="ok",
        )

    outer, inner = run("1" * 16, None), run("2" * 16, "1" * 16)
    await any_store.runs.upsert_runs([outer, inner])

    def evaluation(span: str | None, name: str) -> EvaluationRecord:
        return EvaluationRecord(
            id=evaluation_id("tool", name, trace, span, None),
            name=name,
            source="tool",
            kind="log_record",
            target_type="run",
            trace_id=trace,
            span_id=span,
            conversation_id=None,
            response_id=None,
            score=0.5,
            label="ok",
            explanation=None,
            error_type=None,
            evaluator_version=None,
        )

    # the inner agent span itself; a child span of no run (resolved to the outermost run)
    await any_store.evaluations.write_evaluations([evaluation("2" * 16, "Exact"), evaluation("9" * 16, "Child")])
    await any_store.labels.write_labels([_label("ann", "pass", time.time())])

    reads = any_store.reads
    resolved = {r["name"]: r["target_id"] for r in (await reads.evaluations()).dicts()}
    assert resolved == {"Exact": inner.run_id, "Child": outer.run_id}
    since = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    assert [r["target_id"] for r in (await reads.judge_evaluations("Child", since)).dicts()] == [outer.run_id]
    # against the labels only the labelled targets are read: none yet for Child, then its run
    assert (await reads.judge_evaluations("Child", since, labelled=True)).rows == []
    child_label = dataclasses.replace(
        _label("ann", "pass", time.time()),
        id=label_id("run", outer.run_id, "Child", "ann"),
        scorer_id="Child",
        target_id=outer.run_id,
    )
    await any_store.labels.write_labels([child_label])
    labelled = (await reads.judge_evaluations("Child", since, labelled=True)).dicts()
    assert [r["target_id"] for r in labelled] == [outer.run_id]
    as_scores = (await reads.external_as_scores(all_columns=True)).dicts()
    assert {r["source"] for r in as_scores} == {"external"} and {r["run_id"] for r in as_scores} == {
        outer.run_id,
        inner.run_id,
    }
    assert len((await reads.external_as_scores(name="Exact", since=since, status="ok")).rows) == 1
    assert len((await reads.external_for_targets([trace], ["conv-9"])).rows) == 2
    assert {r["trace_id"] for r in (await reads.run_traces([outer.run_id])).dicts()} == {trace}
    targets = (await reads.target_runs(trace)).dicts()
    assert {(r["run_id"], bool(r["outermost"])) for r in targets} == {(outer.run_id, True), (inner.run_id, False)}
    assert [r["author"] for r in (await reads.labels_for("judge")).dicts()] == ["ann"]
    assert (await reads.labelled_scorers()).dicts() == [{"scorer_id": "Child", "n": 1}, {"scorer_id": "judge", "n": 1}]
    assert (await reads.judge_scores("judge", since)).rows == []
    assert (await reads.version_trend(since, None, 60)).rows == []
    assert {r["table_name"] for r in (await reads.calibration_tables()).dicts()} >= {"labels", "evaluations", "scores"}
    assert [(r["name"], r["n"]) for r in (await reads.external_summary(since)).dicts()] == [("Child", 1), ("Exact", 1)]
