"""Damage to the segment log on real files: only the damaged bytes are lost, never the records
after them; the log's end never moves back, so no offset is handed out twice; what is lost is
reported (``SegmentLog.damage``, counted on the metrics)."""

from __future__ import annotations

import asyncio
import logging
import random
from pathlib import Path

import pytest
from support.seglog import open_log, stop_log

from tracescorer.metrics import Metrics
from tracescorer.seglog import TRACES, CorruptRecord, LogGap, Record, SegmentLog
from tracescorer.seglog.segments import HEADER, segments


def _payload(i: int) -> bytes:
    """Bytes like a request's (kind-like bytes 1 and 2 among them), a different length each."""
    return random.Random(i).randbytes(200 + 37 * i)


async def _written(path: Path, n: int, **kw: object) -> list[int]:
    log = await open_log(path, **kw)
    offsets = [await log.append(TRACES, _payload(i)) for i in range(n)]
    offsets.append(log.end_offset)
    await stop_log(log)
    return offsets


def _flip(segment: Path, at: int, n: int = 16) -> None:
    """Flip ``n`` bytes from file position ``at`` (a disk fault)."""
    with open(segment, "r+b") as fh:
        fh.seek(at)
        data = fh.read(n)
        fh.seek(at)
        fh.write(bytes(b ^ 0xFF for b in data))


def _read_all(log: SegmentLog, start: int = 0) -> tuple[list[Record], list[tuple[int, int, bool]]]:
    """Every record from ``start``, going on past what cannot be read as a reader does: the
    records, and what was skipped (from, to, damaged)."""
    records: list[Record] = []
    skipped: list[tuple[int, int, bool]] = []
    at = start
    while at < log.end_offset:
        try:
            got = log.read(at, 1 << 12)
        except LogGap as exc:
            assert exc.offset == at and exc.resume > at
            skipped.append((exc.offset, exc.resume, isinstance(exc, CorruptRecord)))
            at = exc.resume
            continue
        assert got and got[0].offset == at  # records one after the other
        records += got
        at = got[-1].end
    return records, skipped


def _damage_counted(metrics: Metrics, where: str) -> tuple[float | None, float | None]:
    r = metrics.registry
    return (
        r.get_sample_value("tracescorer_log_damaged_records_total", {"where": where}),
        r.get_sample_value("tracescorer_log_damaged_bytes_total", {"where": where}),
    )


@pytest.mark.parametrize("where", ["payload", "header"])
async def test_a_damaged_middle_record_loses_only_itself(tmp_path, caplog, where):
    """16 bytes flipped in the middle of the last segment (a record's payload, or its header: a
    length and kind that mean nothing): both neighbours and every record after are read; the
    open keeps the segment whole and reports the damaged record with its offsets."""
    path = tmp_path / "log"
    offsets = await _written(path, 30)
    (_, segment), *_ = segments(path)
    size = segment.stat().st_size
    hit = 15
    _flip(segment, offsets[hit] + (HEADER.size + 100 if where == "payload" else 2))
    metrics = Metrics()
    log = await open_log(path, metrics=metrics)
    try:
        assert segment.stat().st_size == size and log.end_offset == offsets[-1]  # nothing cut
        assert [(d.segment, d.start, d.end) for d in log.damage] == [(segment.name, offsets[hit], offsets[hit + 1])]
        assert _damage_counted(metrics, "open") == (1, offsets[hit + 1] - offsets[hit])
        [error] = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert f"log offsets {offsets[hit]} to {offsets[hit + 1]}" in error and segment.name in error, error
        records, skipped = await asyncio.to_thread(_read_all, log)
        assert [r.offset for r in records] == offsets[:hit] + offsets[hit + 1 : -1]
        assert [r.payload for r in records] == [_payload(i) for i in range(30) if i != hit]
        assert skipped == [(offsets[hit], offsets[hit + 1], True)]
        assert await log.append(TRACES, b"after") == offsets[-1]
    finally:
        await stop_log(log)


async def test_damage_across_two_records_loses_those_two(tmp_path):
    path = tmp_path / "log"
    offsets = await _written(path, 10)
    (_, segment), *_ = segments(path)
    _flip(segment, offsets[5] - 8)  # the end of record 4 and the header of record 5
    log = await open_log(path)
    try:
        records, skipped = await asyncio.to_thread(_read_all, log)
        assert [r.offset for r in records] == offsets[:4] + offsets[6:-1]
        assert skipped == [(offsets[4], offsets[6], True)]
    finally:
        await stop_log(log)


async def test_a_truncated_older_segment_is_skipped_up_to_the_next_segments_base(tmp_path):
    """An older segment lost its end (cut in the middle of a record): its records before the cut
    are read, the cut record is skipped as damage, the gap up to the next segment's base is
    skipped, and the later segments are read whole; the open reports the gap."""
    path = tmp_path / "log"
    offsets = await _written(path, 12, segment_bytes=1500)
    found = segments(path)
    assert len(found) >= 4
    base, second = found[1]
    next_base = found[2][0]
    inside = [o for o in offsets if base <= o < next_base]
    assert len(inside) >= 2
    cut = inside[1] + 20  # in the middle of the segment's second record
    with open(second, "r+b") as fh:
        fh.truncate(cut - base)
    metrics = Metrics()
    log = await open_log(path, segment_bytes=1500, metrics=metrics)
    try:
        assert [(d.segment, d.start, d.end) for d in log.damage] == [(second.name, cut, next_base)]
        assert _damage_counted(metrics, "open") == (1, next_base - cut)
        assert log.end_offset == offsets[-1]
        records, skipped = await asyncio.to_thread(_read_all, log)
        lost = [o for o in inside if o >= inside[1]]
        assert [r.offset for r in records] == [o for o in offsets[:-1] if o not in lost]
        assert skipped == [(inside[1], cut, True), (cut, next_base, False)]
        # a reader whose offset is in the gap goes on at the next segment
        assert _read_all(log, cut + 5)[1] == [(cut + 5, next_base, False)]
        assert await log.append(TRACES, b"after") == offsets[-1]
    finally:
        await stop_log(log)


async def test_a_damaged_last_record_is_padded_over_and_no_offset_is_handed_out_twice(tmp_path):
    """Nothing whole follows the damage (the last record, acknowledged: a consumer may have saved
    its end): the tail is padded over, not cut back, so the next append goes where no record was
    ever read, and a consumer going on from its saved offset reads the new record, not the middle
    of one."""
    path = tmp_path / "log"
    offsets = await _written(path, 8)
    (_, segment), *_ = segments(path)
    _flip(segment, offsets[7] + HEADER.size + 50)
    log = await open_log(path)
    try:
        assert [(d.start, d.end) for d in log.damage] == [(offsets[7], offsets[8])]
        assert log.end_offset == offsets[-1]
        after = await log.append(TRACES, b"after the repair")
        assert after == offsets[-1] and after > max(offsets[:-1])
        [record] = await asyncio.to_thread(log.read, offsets[-1], 1 << 20)  # the saved end of the damaged record
        assert (record.offset, record.payload) == (after, b"after the repair")
        with pytest.raises(LogGap) as gap:  # a consumer at the damaged record finds a pad there now
            await asyncio.to_thread(log.read, offsets[7], 1 << 20)
        assert (gap.value.offset, gap.value.resume) == (offsets[7], after)
        assert not isinstance(gap.value, CorruptRecord)
    finally:
        await stop_log(log)


async def test_a_tail_shorter_than_a_header_still_leaves_the_end_past_it(tmp_path):
    path = tmp_path / "log"
    offsets = await _written(path, 3)
    (_, segment), *_ = segments(path)
    with open(segment, "ab") as fh:
        fh.write(b"\x00\x00\x01")  # three bytes of a header
    physical = segment.stat().st_size
    log = await open_log(path)
    try:
        assert log.end_offset == offsets[-1] + HEADER.size > physical  # a pad is a header at least
        assert await log.append(TRACES, b"x") == log.end_offset - HEADER.size - 1
        records, skipped = await asyncio.to_thread(_read_all, log)
        assert [r.payload for r in records] == [_payload(i) for i in range(3)] + [b"x"]
        assert skipped == [(offsets[-1], offsets[-1] + HEADER.size, False)]
    finally:
        await stop_log(log)
