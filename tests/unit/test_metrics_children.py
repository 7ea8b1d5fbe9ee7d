"""Metrics.child keeps labelled children: the same series as labels(), looked up once."""

from __future__ import annotations

from tracescorer.metrics import Metrics


def test_child_is_the_labelled_series_and_is_kept():
    m = Metrics()
    a = m.child(m.decisions, "b1", "scored")
    assert a is m.child(m.decisions, "b1", "scored")
    assert a is not m.child(m.decisions, "b1", "failed")
    a.inc()
    m.decisions.labels("b1", "scored").inc()  # the same series either way
    value = m.registry.get_sample_value("tracescorer_scoring_decisions_total", {"scorer": "b1", "decision": "scored"})
    assert value == 2.0
