"""Admission of requests in flight (issues 9 and 39): places are bounded and given back once;
bytes are held as they arrive (an announced length is only checked); saturation names its bound."""

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


def test_bytes_are_held_as_they_arrive_not_as_announced():
    ing = _ingestor(max_requests=10, max_inflight_bytes=1000)
    first = ing.enter(Signal.TRACES, 600)
    assert ing.inflight_bytes == 0  # an announced length is checked, never held
    ing.reserve(Signal.TRACES, first, 600)
    assert ing.inflight_bytes == 600
    with pytest.raises(IngestRefused) as refused:
        ing.enter(Signal.TRACES, 600)  # its announced body would not fit beside what arrived
    assert "bytes" in str(refused.value)
    chunked = ing.enter(Signal.TRACES)  # no length announced: counted by what it sends
    ing.reserve(Signal.TRACES, chunked, 300)
    with pytest.raises(IngestRefused):
        ing.reserve(Signal.TRACES, chunked, 200)
    assert ing.inflight_bytes == 900
    ing.leave(first)
    ing.reserve(Signal.TRACES, chunked, 2000)  # alone in flight, a body may grow past the bound
    ing.leave(chunked)
    assert ing.inflight_bytes == 0 and ing.requests_in_flight == 0


def test_saturated_names_the_bound_that_is_hit():
    ing = _ingestor(max_requests=2, max_inflight_bytes=1000)
    assert ing.saturated() is None
    a = ing.enter(Signal.TRACES)
    ing.reserve(Signal.TRACES, a, 1000)
    assert "receiver.max_inflight_bytes" in (ing.saturated() or "")
    b = ing.enter(Signal.TRACES)
    assert "receiver.max_concurrent_requests" in (ing.saturated() or "")
    ing.leave(a)
    ing.leave(b)
    full = [True]
    ing.add_saturation_check("connections", lambda: "all busy" if full[0] else None)
    assert ing.saturated() == "connections: all busy"
    full[0] = False
    assert ing.saturated() is None


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
