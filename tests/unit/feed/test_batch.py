"""decode_batch: a batch of log records decoded in the feed's worker thread."""

from __future__ import annotations

from support.payloads import trace_request

from tracescorer.feed.batch import decode_batch
from tracescorer.seglog import TRACES, Record


def test_a_batch_carries_its_decoding_threads_cpu_time() -> None:
    # the feed counts the decode stage's CPU from it: timed around the thread hop on the event
    # loop, it counted whatever else the loop ran meanwhile instead
    spans = [{"trace_id": f"{i + 1:032x}", "span_id": f"{i + 1:016x}", "attributes": {"k": "v"}} for i in range(200)]
    payload = trace_request(spans).SerializeToString()
    batch = decode_batch([Record(offset=0, kind=TRACES, payload=payload)], None, lambda offset: None)
    assert len(batch.spans) == 200 and batch.end == Record(offset=0, kind=TRACES, payload=payload).end
    assert 0 < batch.cpu_s < 5
