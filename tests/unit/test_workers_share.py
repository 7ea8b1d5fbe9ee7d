"""A worker's settings: the daemon's in-memory bounds split between its worker processes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tracescorer.config import Settings
from tracescorer.workers.share import share


def test_each_worker_gets_its_share_of_the_bounds_rounded_up() -> None:
    s = Settings.model_validate(
        {
            "assembly": {"max_traces": 1001, "max_spans": 0},
            "triage": {"max_traces": 10},
            "scoring": {"max_queue": 100, "workers": 1},
            "judge": {"max_concurrency": 16},
        }
    )
    w = share(s, 3)
    assert (w.assembly.max_traces, w.assembly.max_spans) == (334, 0)  # 0 (always read back) stays 0
    assert (w.triage.max_traces, w.scoring.max_queue, w.scoring.workers, w.judge.max_concurrency) == (4, 34, 1, 6)
    assert w.assembly.idle_s == s.assembly.idle_s and w.store == s.store  # the rest as it was
    assert share(s, 1) == s


def test_workers_auto_is_one_per_core_and_none_on_one_core(monkeypatch) -> None:
    import os

    s = Settings.model_validate({})
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2})
    assert s.workers.count == "auto" and s.workers.resolved() == 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    assert s.workers.resolved() == 0
    assert Settings.model_validate({"workers": {"count": 0}}).workers.resolved() == 0
    with pytest.raises(ValidationError, match="count"):
        Settings.model_validate({"workers": {"count": -1}})
