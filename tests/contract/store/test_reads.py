"""The product's typed reads (tracescorer.store.reads) on either engine (DuckDB file; DuckDB span log
with results in PostgreSQL): the agreement gauges over more rows than ``store.query_max_rows`` are
exact, and a read by name (as the ops API serves it) checks its arguments and equals the typed call."""

from __future__ import annotations

import datetime as dt
import math
import time

import pytest

from tracescorer.calibration import stats
from tracescorer.calibration.gauges import AgreementGauges
from tracescorer.metrics import Metrics
from tracescorer.records.labels import LabelRecord, label_id
from tracescorer.records.scores import ScoreRecord

MAX_ROWS = 10
SCORED = 60  # targets the judge scored: every sixth unlabelled
UNSCORED_LABELLED = 5


STORE = {"query_max_rows": MAX_ROWS}


def _score(i: int) -> ScoreRecord:
    value = (i % 7) / 6
    return ScoreRecord(
        id=f"s{i}",
        scorer_id="judge",
        scorer_name="judge",
        scorer_version="v1" if i % 2 else "v2",
        run_id=f"run-{i}",
        trace_id=f"{i:032x}",
        span_id=None,
        conversation_id=None,
        entity_type="agent",
        entity_id="bot",
        source="live",
        score=value,
        reason=None,
        status="ok",
        label="pass" if value >= 0.5 else "fail",
        threshold=0.5,
    )


def _label(i: int, author: str, value: str, score: float, at: float) -> LabelRecord:
    return LabelRecord(
        id=label_id("run", f"run-{i}", "judge", author),
        target_type="run",
        target_id=f"run-{i}",
        scorer_id="judge",
        author=author,
        label=value,
        score=score,
        note=None,
        source="cli",
        labelled_at=at,
        trace_id=f"{i:032x}",
    )


def _labels(now: float) -> tuple[list[LabelRecord], dict[int, tuple[str, float]]]:
    """Labels of most scored targets and a few unscored ones; every fourth target labelled twice,
    apart (the later label wins the tie, the numbers are averaged). What each target's reference is."""
    labels, reference = [], {}
    labelled = [i for i in range(SCORED) if i % 6] + list(range(SCORED, SCORED + UNSCORED_LABELLED))
    for i in labelled:
        first = ("pass" if i % 3 else "fail", (i * 3 % 5) / 4)
        labels.append(_label(i, "ann", *first, now - 60))
        reference[i] = first
        if i % 4 == 0:
            second = ("fail" if first[0] == "pass" else "pass", (i % 5) / 4)
            labels.append(_label(i, "bob", *second, now - 30))
            reference[i] = (second[0], (first[1] + second[1]) / 2)
    return labels, reference


def _expected(reference: dict[int, tuple[str, float]], version: str | None) -> dict[str, float | None]:
    """The figures of the judge's version (None: all versions) against the labels, from the rows written."""
    pairs = [
        ((s.label, s.score), reference[i])
        for i in range(SCORED)
        if i in reference and (s := _score(i)) and version in (None, s.scorer_version)
    ]
    labels = [(j[0], r[0]) for j, r in pairs]
    numbers = [(float(j[1]), r[1]) for j, r in pairs]
    return {
        "pairs": len(pairs),
        "kappa": stats.cohen_kappa(labels),
        "accuracy": stats.accuracy(labels),
        "mae": stats.mean_absolute_error(numbers),
        "spearman": stats.spearman(numbers),
    }


async def test_agreement_gauges_over_more_rows_than_query_max_rows_are_exact(any_store):
    now = time.time()
    labels, reference = _labels(now)
    await any_store.scores.write_scores([_score(i) for i in range(SCORED)], [])
    assert await any_store.labels.write_labels(labels) == len(labels) > MAX_ROWS * 5
    metrics = Metrics()
    gauges = AgreementGauges(any_store.reads, metrics)
    await gauges.refresh()

    def gauge(name: str, version: str) -> float | None:
        return metrics.registry.get_sample_value(
            f"tracescorer_agreement_{name}", {"scorer": "judge", "version": version, "reference": "labels"}
        )

    for version, label in (("v1", "v1"), ("v2", "v2"), (None, "all")):
        expected = _expected(reference, version)
        assert expected["pairs"] > MAX_ROWS
        for name, value in expected.items():
            got = gauge(name, label)
            assert got is not None and value is not None, (name, label)
            assert math.isclose(got, value, rel_tol=1e-12, abs_tol=1e-12), (name, label, got, value)


async def test_a_read_by_name_checks_its_arguments_and_equals_the_typed_call(any_store):
    await any_store.scores.write_scores([_score(i) for i in range(SCORED)], [])
    since = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    typed = await any_store.reads.scores(scorer_id="judge", since=since, about=("run", "run-3"))
    named = await any_store.reads.perform_named(
        "scores", {"scorer_id": "judge", "since": since.isoformat(), "about": ["run", "run-3"]}
    )
    assert named == typed and [r["id"] for r in typed.dicts()] == ["s3"]
    # a limit keeps the newest and says more matched; no limit reads every row, past query_max_rows
    limited = await any_store.reads.perform_named("scores", {"limit": 5})
    assert len(limited.rows) == 5 and limited.truncated
    every = await any_store.reads.scores()
    assert len(every.rows) == SCORED and not every.truncated
    for name, args in (
        ("no_such_read", {}),
        ("scores", {"no_such_argument": 1}),
        ("scores", {"since": "not a time"}),
        ("runs_of", {"kind": "span", "target_id": "x"}),
    ):
        with pytest.raises((ValueError, KeyError)):
            await any_store.reads.perform_named(name, args)
