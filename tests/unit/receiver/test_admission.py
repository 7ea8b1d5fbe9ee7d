"""Admission of requests in flight (issue 9): places are taken on arrival, before a body is read,
and bytes announced by a request are held while it is received."""

from __future__ import annotations

import pytest

from tracescorer.metrics import Metrics
from tracescorer.receiver.ingest import IngestRefused, Ingestor, Signal


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
