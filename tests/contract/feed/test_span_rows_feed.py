"""The span-rows feed (``store.spans``): a derived copy of the segment log. Its rows are what a
fresh feed writes again from the same log (rows can be rebuilt within the log's retention), a
restart stores nothing twice, it waits while the pipeline is behind, and what the log released
before it got there is counted, not waited for."""

from __future__ import annotations

from typing import Any

from support.daemon import wait_for_async
from support.db import fetch
from support.payloads import trace_request

from tracescorer.feed.stage import LogFeed
from tracescorer.metrics import Metrics
from tracescorer.seglog import TRACES, SegmentLog
from tracescorer.seglog.segments import segments
from tracescorer.store.duckdb import DuckDBStore

ROWS = "SELECT trace_id, span_id, name, log_offset FROM spans ORDER BY log_offset, span_id"


async def _requests(log: SegmentLog, first: int, n: int) -> None:
    for at in range(first, first + n):
        spans = [
            {"trace_id": f"{at + 1:032x}", "span_id": f"{2 * at + 1:016x}", "name": "GET /"},
            {"trace_id": f"{at + 1:032x}", "span_id": f"{2 * at + 2:016x}", "name": "chat m"},
        ]
        await log.append(TRACES, trace_request(spans).SerializeToString())


async def _written(log: SegmentLog, store: DuckDBStore, **kwargs: Any) -> LogFeed:
    """A span-rows feed run until it stored the whole log, then stopped."""
    feed = LogFeed(log, store, store, Metrics(), rows=True, **kwargs)
    await feed.start()
    await wait_for_async(feed.caught_up, 30, what="the rows feed caught up")
    await feed.stop(0.0)
    return feed


async def test_rows_rebuilt_from_the_log_equal_the_rows_written_live_and_a_restart_writes_none_twice(tmp_path):
    log = SegmentLog(tmp_path / "log", sync=False)
    await log.start()
    live, rebuilt = DuckDBStore(tmp_path / "live.duckdb"), DuckDBStore(tmp_path / "rebuilt.duckdb")
    await live.start()
    await rebuilt.start()
    try:
        await _requests(log, 0, 20)
        await _written(log, live)
        await _requests(log, 20, 10)
        await _written(log, live)  # a restart: goes on after what it stored
        rows = await fetch(live, ROWS)
        assert len(rows) == 60 and len({r[1] for r in rows}) == 60  # every span once
        await _written(log, rebuilt)  # a feed with no rows of its own: from the log's start
        assert await fetch(rebuilt, ROWS) == rows
    finally:
        await live.stop()
        await rebuilt.stop()
        await log.stop(0.0)


async def test_the_rows_feed_waits_while_the_pipeline_is_behind(tmp_path):
    log = SegmentLog(tmp_path / "log", sync=False)
    await log.start()
    store = DuckDBStore(tmp_path / "s.duckdb")
    await store.start()
    behind = True
    feed = LogFeed(log, store, store, Metrics(), rows=True)
    feed.add_gate("pipeline", lambda: "behind" if behind else None)
    try:
        await _requests(log, 0, 5)
        await feed.start()
        await wait_for_async(lambda: feed.held_by == "pipeline: behind", 10, what="the gate holding the feed")
        assert await fetch(store, "SELECT count(*) FROM spans") == [(0,)]
        behind = False
        await wait_for_async(feed.caught_up, 30, what="the rows feed caught up")
        assert await fetch(store, "SELECT count(*) FROM spans") == [(10,)]
    finally:
        await feed.stop(0.0)
        await store.stop()
        await log.stop(0.0)


async def test_rows_of_a_released_part_of_the_log_are_skipped_and_counted(tmp_path):
    log = SegmentLog(tmp_path / "log", sync=False, segment_bytes=4096)
    await log.start()
    store = DuckDBStore(tmp_path / "s.duckdb")
    await store.start()
    try:
        await _requests(log, 0, 60)  # several segments
        bases = [base for base, _ in segments(log.directory)]
        assert len(bases) > 2
        released_to = bases[2]
        log.release_before(released_to)  # the assembly feed let them go: the rows feed was too far behind
        metrics = Metrics()
        feed = LogFeed(log, store, store, metrics, rows=True)
        await store.set_feed_offset(0, consumer=feed.consumer)  # where it stood at the last stop
        await feed.start()
        await wait_for_async(feed.caught_up, 30, what="the rows feed caught up")
        await feed.stop(0.0)
        skipped = metrics.registry.get_sample_value("tracescorer_span_rows_skipped_bytes_total")
        assert skipped is not None and skipped > 0
        [(first,)] = await fetch(store, "SELECT min(log_offset) FROM spans")
        assert first >= released_to
    finally:
        await store.stop()
        await log.stop(0.0)
