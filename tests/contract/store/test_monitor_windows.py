"""Monitor windows rebuilt from the store, on both engines: a ``coverage`` window from the live
decision rows (the start-up rebuild, and every recount with several daemons), next to a score
window in the same call."""

from __future__ import annotations

import time

import pytest
from support.records import decision_row, score_row

from tracescorer.monitors.window import MAX_EXAMPLES
from tracescorer.records.monitors import Counts, WindowSpec

WIDTH_S = 60.0


def _spec(index: int, *, decisions: bool, since: float) -> WindowSpec:
    return WindowSpec(
        index=index,
        scorer_ids=("s", "s2"),
        since=since,
        width_s=WIDTH_S,
        example_kind="skipped" if decisions else "fail",
        threshold=0.5,
        decisions=decisions,
    )


def _total(buckets: list[tuple[int, int, Counts]], index: int) -> Counts:
    total = Counts()
    for i, _, counts in buckets:
        if i == index:
            total.add(counts)
    return total


async def test_a_coverage_window_is_rebuilt_from_the_live_decisions(any_store):
    decisions = [
        *(decision_row(i, score_id=f"s{i}") for i in range(3)),  # scored
        decision_row(3, decision="failed", detail="judge timed out"),
        decision_row(4, decision="filtered_out", sample_rate=0.5, detail="agent_name: 'v2' is not 'support'"),
        decision_row(5, decision="filtered_out", sample_rate=0.5, scorer_id="s2", detail="convention"),
        *(decision_row(i, decision="sampled_out") for i in range(6, 11)),  # not eligible
        decision_row(11, source="backfill"),  # history re-scored: not live
        decision_row(12, decision="failed", scorer_id="other"),  # a scorer the monitor does not watch
    ]
    scores = [score_row(i, label="fail" if i == 0 else "pass") for i in range(3)]
    await any_store.scores.write_scores(scores, decisions)
    since = time.time() - 600
    rebuilt = await any_store.monitors.rebuild_monitor_windows(
        [_spec(0, decisions=False, since=since), _spec(1, decisions=True, since=since)], MAX_EXAMPLES
    )

    coverage = _total(rebuilt.buckets, 1)
    assert (coverage.eligible, coverage.covered, coverage.n) == (pytest.approx(5.0), 3, 0)
    skipped = [(s.status, s.reason, s.run_id, s.scorer_id) for i, s in rebuilt.examples if i == 1]
    assert sorted(skipped) == [
        ("failed", "judge timed out", "r3", "s"),
        ("filtered_out", "agent_name: 'v2' is not 'support'", "r4", "s"),
        ("filtered_out", "convention", "r5", "s2"),
    ]
    quality = _total(rebuilt.buckets, 0)  # the score window beside it counts scores, not decisions
    assert (quality.n, quality.passed, quality.failed, quality.eligible) == (3, 2, 1, 0.0)
    assert [(s.score_id, s.label) for i, s in rebuilt.examples if i == 0] == [("s0", "fail")]

    later = await any_store.monitors.rebuild_monitor_windows([_spec(1, decisions=True, since=time.time() + 60)], 5)
    assert later.buckets == [] and later.examples == []  # nothing decided since then
