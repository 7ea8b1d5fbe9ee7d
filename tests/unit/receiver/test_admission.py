"""Admission of requests in flight (issues 9 and 39): places are bounded and given back once;
bytes are held as they arrive (an announced length is only checked); saturation names its bound."""

from __future__ import annotations

import pytest

from tracescorer.metrics import Metrics
from tracescorer.receiver.ingest import Ingestor, IngestRefused, Signal


def _ingestor(**kw) -> Ingestor:
    return Ingestor(requests=None, metrics=Metrics(), **kw)  # type: ignore[arg-type] - enter/leave never reach the store


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


def test_a_backlog_check_refuses_new_requests_as_retryable_naming_its_bound():
    behind = [False]
    ing = _ingestor()
    ing.add_backlog_check("log", lambda: "the feed is 9 bytes behind" if behind[0] else None)
    ing.leave(ing.enter(Signal.TRACES))
    behind[0] = True
    with pytest.raises(IngestRefused) as refused:
        ing.enter(Signal.TRACES)
    assert refused.value.retryable and "the feed is 9 bytes behind" in str(refused.value)
    assert ing.over_bound() == "log: the feed is 9 bytes behind"
    behind[0] = False
    ing.leave(ing.enter(Signal.TRACES))
