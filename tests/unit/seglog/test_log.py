"""The segment log on real files: offsets, group commit, the torn tail, damage, rollover and
release, a full disk (more damage: test_damage.py)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from support.seglog import open_log, stop_log

from tracescorer.seglog import LOGS, TRACES, CorruptRecord, LogClosed, LogFull, LogGap, SegmentLog, written_since
from tracescorer.seglog.segments import HEADER, segment_name, segments


async def test_appends_are_read_back_in_order_with_their_offsets(tmp_path):
    log = await open_log(tmp_path / "log")
    try:
        payloads = [f"request {i}".encode() * (i + 1) for i in range(20)]
        offsets = [await log.append(TRACES if i % 3 else LOGS, p) for i, p in enumerate(payloads)]
        assert offsets == sorted(offsets) and offsets[0] == 0
        records = await asyncio.to_thread(log.read, 0, 1 << 30)
        assert [r.payload for r in records] == payloads
        assert [r.offset for r in records] == offsets
        assert [r.kind for r in records] == [TRACES if i % 3 else LOGS for i in range(20)]
        assert records[-1].end == log.end_offset
        # a read from a record's end goes on from there, and stops at about max_bytes
        later = await asyncio.to_thread(log.read, records[9].end, len(payloads[10]))
        assert [r.offset for r in later] == [offsets[10]]
    finally:
        await stop_log(log)


async def test_concurrent_appends_share_syncs(tmp_path):
    log = await open_log(tmp_path / "log")
    try:
        offsets = await asyncio.gather(*(log.append(TRACES, b"x" * 1000) for _ in range(200)))
        assert len(set(offsets)) == 200
        assert log.syncs < 200  # group commit: one fdatasync answered many appends
    finally:
        await stop_log(log)


async def test_a_torn_tail_is_padded_over_at_open_and_appends_go_on_past_it(tmp_path):
    path = tmp_path / "log"
    log = await open_log(path)
    kept = [await log.append(TRACES, b"acknowledged %d" % i) for i in range(5)]
    end = log.end_offset
    await stop_log(log)
    (_, segment), *_ = segments(path)
    with open(segment, "ab") as fh:  # a crash in the middle of a write: a header and half a payload
        fh.write(HEADER.pack(1000, 0, TRACES) + b"half")
    physical = segment.stat().st_size
    log = await open_log(path)
    try:
        assert [(d.start, d.end) for d in log.damage] == [(end, physical)]
        # the log's end does not move back: an offset past the torn bytes is never handed out again
        assert log.end_offset == physical
        assert [r.offset for r in await asyncio.to_thread(log.read, 0, 1 << 20)] == kept
        with pytest.raises(LogGap) as gap:  # the pad: no record, not damage
            await asyncio.to_thread(log.read, end, 1 << 20)
        assert not isinstance(gap.value, CorruptRecord) and (gap.value.offset, gap.value.resume) == (end, physical)
        assert await log.append(TRACES, b"after") == physical
    finally:
        await stop_log(log)
    log = await open_log(path)  # the pad is a whole record: nothing to report again
    try:
        assert log.damage == [] and log.end_offset > physical
    finally:
        await stop_log(log)


async def test_a_damaged_record_in_a_sealed_segment_is_reported_with_its_offset(tmp_path):
    path = tmp_path / "log"
    log = await open_log(path, segment_bytes=200)
    offsets = [await log.append(TRACES, bytes([i]) * 120) for i in range(4)]
    await stop_log(log)
    found = segments(path)
    assert len(found) >= 3  # one record a segment past 200 bytes
    base, first = found[0]
    data = bytearray(first.read_bytes())
    data[HEADER.size + 5] ^= 0xFF  # a flipped bit in the first record's payload
    first.write_bytes(bytes(data))
    log = await open_log(path, segment_bytes=200)
    try:
        with pytest.raises(CorruptRecord) as damaged:
            await asyncio.to_thread(log.read, 0, 1 << 20)
        assert damaged.value.offset == offsets[0] == base
        assert damaged.value.resume == offsets[1] and damaged.value.segment == first.name
        # the records after it, in later segments, are still read
        assert [r.offset for r in await asyncio.to_thread(log.read, offsets[1], 1 << 20)] == offsets[1:]
    finally:
        await stop_log(log)


async def test_segments_roll_over_and_are_released_once_passed(tmp_path):
    path = tmp_path / "log"
    log = await open_log(path, segment_bytes=1000)
    try:
        offsets = [await log.append(TRACES, b"y" * 300) for _ in range(10)]
        found = segments(path)
        assert len(found) > 3 and found[0][0] == 0
        assert [r.offset for r in await asyncio.to_thread(log.read, 0, 1 << 20)] == offsets
        deleted = log.release_before(offsets[6])
        assert deleted > 0 and log.start_offset <= offsets[6]
        assert all(base <= offsets[6] for base, _ in found[:deleted])
        # what was passed is gone; what was not is read as before
        assert [r.offset for r in await asyncio.to_thread(log.read, offsets[6], 1 << 20)] == offsets[6:]
        assert log.release_before(log.end_offset) >= 0 and segments(path)  # the one being written stays
    finally:
        await stop_log(log)


async def test_a_full_disk_refuses_appends_before_writing_anything(tmp_path):
    log = SegmentLog(tmp_path / "log", min_free_bytes=1 << 62)  # more than any disk has free
    await log.start()
    try:
        with pytest.raises(LogFull, match="disk nearly full"):
            await log.append(TRACES, b"refused")
        assert log.end_offset == 0 and segments(tmp_path / "log")[0][1].stat().st_size == 0
    finally:
        await stop_log(log)


async def test_nothing_is_taken_after_stop(tmp_path):
    log = await open_log(tmp_path / "log")
    await log.append(TRACES, b"before")
    await stop_log(log)
    with pytest.raises(LogClosed):
        await log.append(TRACES, b"after")


def test_written_since_names_the_oldest_segment_written_within_a_time(tmp_path: Path) -> None:
    for base, mtime in ((0, 1_000.0), (4096, 2_000.0), (8192, 3_000.0)):
        path = tmp_path / segment_name(base)
        path.write_bytes(b"")
        os.utime(path, (mtime, mtime))
    assert written_since(tmp_path, 1_500.0) == 4096
    assert written_since(tmp_path, 500.0) == 0
    assert written_since(tmp_path, 3_000.0) == 8192
    assert written_since(tmp_path, 3_001.0) is None
