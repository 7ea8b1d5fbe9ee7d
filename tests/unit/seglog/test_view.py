"""A worker's view of the segment log: reads only what the writer said is synced."""

from __future__ import annotations

import asyncio
import time

from tracescorer.seglog import TRACES, LogView, SegmentLog
from tracescorer.seglog.segments import segments


async def test_a_view_reads_what_the_writer_synced_and_waits_for_more(tmp_path) -> None:
    log = SegmentLog(tmp_path / "log", segment_bytes=1 << 16, min_free_bytes=0, sync=False)
    await log.start()
    try:
        offsets = [await log.append(TRACES, bytes([i]) * 40_000) for i in range(4)]  # several segments
        view = LogView(log.directory)
        assert view.read(0, 1 << 30) == []  # nothing told yet
        view.advance(offsets[2], time.time())
        got = view.read(0, 1 << 30)
        assert [r.offset for r in got] == offsets[:2]
        assert not await view.wait_beyond(offsets[2], 0.05)
        waiter = asyncio.create_task(view.wait_beyond(offsets[2], 5))
        await asyncio.sleep(0.01)
        view.advance(log.end_offset, time.time())
        assert await waiter
        assert [r.offset for r in view.read(offsets[2], 1 << 30)] == offsets[2:]
        assert view.synced_at(offsets[3]) is not None
        assert view.start_offset == log.start_offset
        assert view.release_before(offsets[3]) == 0 and view.keep_from == offsets[3]
        assert len(segments(log.directory)) > 1  # the view deletes nothing
    finally:
        await log.stop(time.monotonic() + 5)
