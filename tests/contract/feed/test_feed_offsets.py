"""LogFeed's saved offset with a hold (``store.spans: none``): a worker's feed that never moved its
saved offset, because assembly held it at its first record, starts again from there — not where
the other workers' feeds are (a worker killed before its first assembly lost its traces so)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from support.daemon import wait_for_async
from support.payloads import trace_request

from tracescorer.feed.partition import Partition
from tracescorer.feed.stage import LogFeed
from tracescorer.metrics import Metrics
from tracescorer.seglog import TRACES, SegmentLog
from tracescorer.store.duckdb import DuckDBStore

W0, W1 = Partition(0, 2), Partition(1, 2)


class Seen:
    """A listener keeping what the feed handed on."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, bool]] = []
        self.replayed = False

    def on_committed(
        self, spans: Sequence[Any], logs: Sequence[Any], received: tuple[float, float], replayed: bool = False, **_: Any
    ) -> None:
        self.spans += [(s.span_id, replayed) for s in spans]

    def on_replayed(self) -> None:
        self.replayed = True


def _owned_by(partition: Partition, n: int) -> list[str]:
    """``n`` trace ids (hex) of ``partition``'s share."""
    out, i = [], 1
    while len(out) < n:
        tid = f"{i:032x}"
        if partition.owns_hex(tid):
            out.append(tid)
        i += 1
    return out


async def test_a_feed_held_at_its_first_record_starts_there_again(tmp_path) -> None:
    store = DuckDBStore(tmp_path / "s.duckdb")
    await store.start()
    log = SegmentLog(tmp_path / "log", sync=False)
    await log.start()
    try:
        traces = _owned_by(W0, 3)
        for at, tid in enumerate(traces):
            spans = [{"trace_id": tid, "span_id": f"{at + 1:016x}", "name": "chat"}]
            await log.append(TRACES, trace_request(spans).SerializeToString())
        end = log.end_offset

        first = Seen()
        feed = LogFeed(log, store, store, Metrics(), listeners=[first], partition=W0)
        feed.position.add_hold(lambda: 0 if first.spans else None)  # assembly holds every trace it was handed
        await feed.start()
        await wait_for_async(lambda: len(first.spans) == 3 and feed.offset == end, 10, what="the records handed on")
        await feed.stop(time.monotonic() + 5)
        # the other worker went on past these records (none of them is its share)
        await store.set_feed_offset(end, consumer="w1/2")

        again = Seen()
        restarted = LogFeed(log, store, store, Metrics(), listeners=[again], partition=W0)
        await restarted.start()
        await wait_for_async(lambda: len(again.spans) == 3, 10, what="the held records handed on again")
        assert all(replayed for _, replayed in again.spans)
        await wait_for_async(lambda: again.replayed, 10, what="the replay told over")
        await restarted.stop(time.monotonic() + 5)
        assert (await store.feed_consumers())["w0/2"][0] == end  # nothing held: it moved on
    finally:
        await log.stop(time.monotonic() + 5)
        await store.stop()
