"""The ``coverage`` aggregate: what counts as eligible, what as covered, and the examples it keeps
(the window alone; through the daemon: tests/e2e/test_monitor_coverage.py; rebuilt from the store:
tests/contract/store/test_monitor_windows.py)."""

from __future__ import annotations

from typing import Any

import pytest
from support.records import decision_row

from tracescorer.config.monitors import MonitorSettings
from tracescorer.monitors.evaluator import breaches, clears, has_verdict
from tracescorer.monitors.window import Reading, Window, decision_sample
from tracescorer.records.monitors import Counts

T = 5000.0


def _monitor(**extra: Any) -> MonitorSettings:
    return MonitorSettings.model_validate(
        {"id": "cov", "scorer": "s", "aggregate": "coverage", "window": "10m", "below": 0.5, "min_samples": 4, **extra}
    )


def _window(decisions: list[tuple[str, float]], **extra: Any) -> Window:
    """A window fed ``(decision, sample rate)`` rows, all at ``T``."""
    w = Window(_monitor(**extra))
    for i, (decision, rate) in enumerate(decisions):
        row = decision_row(i, decision=decision, sample_rate=rate, detail=f"why {i}")
        w.add(decision_sample(row, T), row.sample_rate)
    return w


def test_every_decision_but_the_samplers_is_an_eligible_target_and_only_scored_covers_one():
    sampled_in = ["scored", "scored", "not_scorable", "failed", "rate_limited", "budget_exhausted", "gated"]
    w = _window([(d, 1.0) for d in [*sampled_in, "sampled_out", "sampled_out"]])
    assert w.read(T) == Reading(pytest.approx(2 / 7), 7)


def test_a_filter_that_stops_matching_drives_coverage_to_zero_instead_of_emptying_the_window():
    """The silent skip: were filtered_out targets not eligible, the window would hold nothing and
    the monitor would read 'no data' (which clears) exactly when the binding stopped scoring."""
    holding = _window([("scored", 1.0)] * 6)
    assert holding.read(T) == Reading(1.0, 6)
    skipping = _window([("filtered_out", 1.0)] * 6)
    reading = skipping.read(T)
    assert reading == Reading(0.0, 6)
    monitor = _monitor()
    assert has_verdict(monitor, reading) and breaches(monitor, reading) and not clears(monitor, reading)


def test_a_filtered_out_target_of_a_sampling_binding_counts_as_the_share_its_sampler_lets_in():
    """A binding sampling 10 % that scores every target it samples reads 1.0 whatever its traffic;
    the filter runs before the sampler, so of 10 filtered_out targets one would have been scored."""
    only_sampled = _window([("scored", 0.1)] * 5 + [("sampled_out", 0.1)] * 45)
    assert only_sampled.read(T) == Reading(1.0, 5)
    half_filtered = _window([("scored", 0.1)] * 5 + [("sampled_out", 0.1)] * 45 + [("filtered_out", 0.1)] * 50)
    assert half_filtered.read(T) == Reading(pytest.approx(0.5), 10)


def test_the_examples_are_the_targets_left_without_a_score_with_why():
    w = _window([("scored", 1.0), ("filtered_out", 1.0), ("sampled_out", 1.0), ("failed", 1.0)])
    examples = w.recent_examples(T)
    assert [(e.status, e.reason, e.run_id) for e in examples] == [
        ("failed", "why 3", "r3"),
        ("filtered_out", "why 1", "r1"),
    ]


def test_too_few_eligible_targets_decide_nothing_and_an_empty_window_clears():
    few = _window([("filtered_out", 1.0)] * 3)
    monitor = _monitor()
    assert few.read(T) == Reading(0.0, 3) and not has_verdict(monitor, few.read(T))
    assert _window([("sampled_out", 1.0)] * 10).read(T) == Reading(None, 0)  # nothing eligible: nothing wrong
    assert clears(monitor, Reading(None, 0))


def test_coverage_counts_slide_out_of_the_window_and_add_up_bucket_by_bucket():
    w = _window([("scored", 1.0)] * 4)
    w.add_counts(w.bucket_of(T + 300), Counts(eligible=4.0, covered=0))
    assert w.read(T + 300) == Reading(0.5, 8)
    assert w.read(T + 610) == Reading(0.0, 4)  # the scored bucket (10 s wide) left the 10m window


def test_coverage_is_a_fraction_and_needs_no_threshold_on_the_binding():
    assert _monitor(below=0.9).threshold == 0.9
    with pytest.raises(ValueError, match="fraction between 0 and 1"):
        _monitor(below=90)
