"""Admission of requests in flight (issue 9): places are taken on arrival, before a body is read,
and bytes announced by a request are held while it is received."""

from __future__ import annotations

import itertools
import re

import pytest

from tracescorer.metrics import Metrics
from tracescorer.receiver.ingest import SHED_FROM, Ingestor, IngestRefused, Signal


def _ingestor(**kw) -> Ingestor:
    return Ingestor(store=None, metrics=Metrics(), **kw)  # type: ignore[arg-type] - enter/leave never reach the store


def test_places_are_bounded_and_given_back_once():
    ing = _ingestor(max_requests=2)
    a, b = ing.enter(Signal.TRACES), ing.enter(Signal.LOGS)
    with pytest.raises(IngestRefused) as refused:
        ing.enter(Signal.TRACES)
    assert refused.value.retryable and refused.value.reason == "backpressure"
    assert "receiver.max_concurrent_requests" in str(refused.value)
    ing.leave(a)
    ing.leave(a)  # a second leave of the same ticket gives back nothing more
    assert ing.requests_in_flight == 1
    ing.enter(Signal.TRACES)
    with pytest.raises(IngestRefused):
        ing.enter(Signal.TRACES)
    ing.leave(b)
    assert ing.requests_in_flight == 1


def test_announced_bodies_are_held_while_received():
    ing = _ingestor(max_requests=10, max_inflight_bytes=1000)
    first = ing.enter(Signal.TRACES, 600)
    assert ing.inflight_bytes == 600
    with pytest.raises(IngestRefused) as refused:
        ing.enter(Signal.TRACES, 600)  # its body would not fit beside the one being read
    assert "bytes" in str(refused.value)
    small = ing.enter(Signal.TRACES, 300)
    ing.leave(first)
    ing.leave(small)
    assert ing.inflight_bytes == 0 and ing.requests_in_flight == 0


def _admitted(ing: Ingestor, n: int, stage: str) -> list[bool]:
    out = []
    for _ in range(n):
        try:
            ing.leave(ing.enter(Signal.TRACES))
            out.append(True)
        except IngestRefused as exc:
            assert exc.retryable and exc.reason == "backpressure" and stage in str(exc)
            out.append(False)
    return out


def test_a_share_of_new_requests_growing_with_a_stages_load_is_refused_evenly():
    load = [0.0]
    metrics = Metrics()
    ing = Ingestor(store=None, metrics=metrics, max_requests=10_000)  # type: ignore[arg-type]
    ing.add_backlog_check("scoring", lambda: None, lambda: load[0])
    load[0] = SHED_FROM * 0.9
    assert all(_admitted(ing, 50, "scoring"))  # below SHED_FROM nothing is refused
    load[0] = SHED_FROM + (1 - SHED_FROM) / 2  # half way to the bound: every other request
    got = _admitted(ing, 40, "scoring")
    assert got.count(False) in (19, 20) and not any(a == b is False for a, b in itertools.pairwise(got)), got
    load[0] = 1.2
    assert not any(_admitted(ing, 10, "scoring"))
    load[0] = 0.0
    assert all(_admitted(ing, 10, "scoring"))
    counted = re.search(r'tracescorer_receiver_backpressure_total\{bound="scoring"\} (\S+)', metrics.render().decode())
    assert counted and float(counted.group(1)) == got.count(False) + 10


def test_admission_follows_a_stages_throughput_while_it_is_behind():
    now, load, rate = [0.0], [0.0], [1000.0]  # items/s the stage takes in; requests are charged ~100 items
    ing = Ingestor(store=None, metrics=Metrics(), max_requests=10_000, clock=lambda: now[0])  # type: ignore[arg-type]
    ing.add_backlog_check("assembly", lambda: None, lambda: load[0], lambda: rate[0])

    def offer(seconds: float, per_s: int) -> int:
        admitted = 0
        for _ in range(int(seconds * per_s)):
            now[0] += 1 / per_s
            admitted += _admitted(ing, 1, "assembly")[0]
        return admitted

    assert offer(1, 100) == 100  # keeping up: no limit, whatever is offered
    load[0] = SHED_FROM + 1e-6  # behind: 100 requests/s offered, its 1,000 items/s = 10 requests/s admitted
    assert 10 * 10 <= offer(10, 100) <= 10 * 10 + 6  # (+ a burst of half a second)
    load[0] = SHED_FROM + (1 - SHED_FROM) / 2  # further behind: admitted a quarter below what it takes in
    assert 7.5 * 10 - 1 <= offer(10, 100) <= 7.5 * 10 + 1
    rate[0] = 0.0  # stalled: nothing is admitted until it moves again
    offer(1, 100)
    assert offer(5, 100) == 0
    load[0] = 0.1  # caught up
    assert offer(1, 100) == 100
