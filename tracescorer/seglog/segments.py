"""Segment files of the log: framing, checksums, reading records back past damage.

The log is a directory of segment files named by the log offset of their first byte
(``00000000000000000000.seg``, …): the log's offsets are byte positions in the concatenation of
its segments, so an offset names one record for good, across restarts and deleted segments.
A record is a 9-byte header — its payload's length (u32 big-endian), the CRC-32 of its kind byte
and payload (u32), its kind (u8) — then the payload. A record is acknowledged only once the
segment holding it was synced (:mod:`tracescorer.seglog.log`).

Damage loses only the damaged bytes: a reader that meets a record whose header or checksum does
not hold resynchronises on the next whole record (a header whose length fits and whose checksum
holds) and goes on from there (:class:`CorruptRecord` says where). Bytes without records are
skipped as well (:class:`LogGap`): a pad record (kind 0) that took the place of a torn tail at
open, and the lost end of a segment shorter than the next segment's base.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

HEADER = struct.Struct(">IIB")
SUFFIX = ".seg"

PAD, TRACES, LOGS = 0, 1, 2
KINDS = (PAD, TRACES, LOGS)
#: a byte that may be a record's kind, at the end of its header: where resynchronising looks
_KIND_BYTE = re.compile(b"[\x01\x02]")
_RESYNC_CHUNK = 1 << 20


class LogGap(Exception):
    """No record to read from log offset ``offset`` on: a reader goes on at ``resume``. Itself,
    bytes a repair at open left without records (reported then): a pad record, a segment's lost end."""

    def __init__(self, offset: int, resume: int, why: str = "no record", segment: str = "") -> None:
        super().__init__(f"no record at log offset {offset}: {why}; the next is at {resume}")
        self.offset, self.resume, self.why, self.segment = offset, resume, why, segment


class CorruptRecord(LogGap):
    """Damaged bytes from log offset ``offset`` (a record whose header or checksum does not hold:
    a disk fault) to ``resume``, where the next whole record of ``segment`` starts (or its end)."""

    def __init__(self, offset: int, resume: int, why: str, segment: str = "") -> None:
        super().__init__(offset, resume, why, segment)
        self.args = (f"corrupt record at log offset {offset}: {why}; the next whole record is at {resume}",)


@dataclass(frozen=True, slots=True)
class Record:
    """One record read back: its offset in the log, its kind, its payload, and where the next starts."""

    offset: int
    kind: int
    payload: bytes

    @property
    def end(self) -> int:
        return self.offset + HEADER.size + len(self.payload)


def frame(kind: int, payload: bytes) -> bytes:
    """A record's bytes: header and payload."""
    return HEADER.pack(len(payload), zlib.crc32(payload, zlib.crc32(bytes((kind,)))), kind) + payload


def segment_name(base: int) -> str:
    return f"{base:020d}{SUFFIX}"


def segments(directory: Path) -> list[tuple[int, Path]]:
    """The directory's segment files by base offset, oldest first."""
    found = []
    for path in directory.iterdir():
        if path.suffix == SUFFIX and path.stem.isdigit():
            found.append((int(path.stem), path))
    return sorted(found)


def written_since(directory: Path, since: float) -> int | None:
    """The base offset of the oldest segment last written at or after ``since`` (epoch seconds):
    older segments hold only records appended before it. None when there is none."""
    for base, path in segments(directory):
        try:
            if path.stat().st_mtime >= since:
                return base
        except FileNotFoundError:  # released meanwhile
            continue
    return None


def scan(path: Path, base: int, start: int, until: int = 1 << 62) -> Iterator[Record]:
    """The whole records of the segment at ``path`` (base offset ``base``), pads included, from log
    offset ``start`` up to its end or log offset ``until`` (the synced end: what follows may be
    half written). Raises :class:`CorruptRecord` at a record whose header or checksum does not
    hold, saying where the next whole record starts."""
    with open(path, "rb") as fh:
        limit = min(os.fstat(fh.fileno()).st_size, until - base)
        pos = start - base
        fh.seek(pos)
        while pos < limit:
            got = _next(fh, pos, limit)
            if isinstance(got, str):
                raise CorruptRecord(base + pos, base + _resync(fh, pos, limit), got, path.name)
            yield Record(base + pos, *got)
            pos += HEADER.size + len(got[1])


def _next(fh: BinaryIO, pos: int, limit: int) -> tuple[int, bytes] | str:
    """The kind and payload of the record at file position ``pos`` (where ``fh`` is), or why it
    is not whole."""
    header = fh.read(HEADER.size)
    if len(header) < HEADER.size or pos + HEADER.size > limit:
        return "the header is cut short"
    length, crc, kind = HEADER.unpack(header)
    if kind not in KINDS:
        return f"kind {kind}, length {length}"
    if pos + HEADER.size + length > limit:
        return f"a length of {length} runs past the segment's end"
    payload = fh.read(length)
    if zlib.crc32(payload, zlib.crc32(header[8:])) != crc:
        return "checksum mismatch"
    return kind, payload


def _resync(fh: BinaryIO, pos: int, limit: int) -> int:
    """Where the first whole record after file position ``pos`` starts (``limit`` when none does):
    a header whose kind is a record's, whose length fits and whose checksum holds."""
    at = pos + 1
    while at + HEADER.size <= limit:
        fh.seek(at)
        chunk = fh.read(min(_RESYNC_CHUNK, limit - at))
        if len(chunk) < HEADER.size:  # the file shrank meanwhile
            break
        for found in _KIND_BYTE.finditer(chunk, HEADER.size - 1):
            p = found.start() - (HEADER.size - 1)  # where that header would start
            length, crc, kind = HEADER.unpack_from(chunk, p)
            if at + p + HEADER.size + length > limit:
                continue
            fh.seek(at + p + HEADER.size)
            if zlib.crc32(fh.read(length), zlib.crc32(bytes((kind,)))) == crc:
                return at + p
        at += len(chunk) - (HEADER.size - 1)  # a header across the chunk's end is in the next one
    return limit


def read_range(directory: Path, start: int, end: int, max_bytes: int) -> list[Record]:
    """Records of the log in ``directory`` from offset ``start`` (an offset before the oldest
    segment kept reads from it) up to the synced end ``end``, about ``max_bytes`` of payload at
    most, one after the other: the read stops before bytes without records. Raises
    :class:`LogGap` (:class:`CorruptRecord` at damage) when those bytes come first, saying where
    to go on. Blocking file I/O."""
    found = segments(directory)
    out: list[Record] = []
    taken, at = 0, start
    gap_from: int | None = None  # where bytes without records started (before any record)
    for i, (base, path) in enumerate(found):
        stop = min(found[i + 1][0], end) if i + 1 < len(found) else end
        if stop <= at:
            continue
        at = max(at, base)
        try:
            for record in scan(path, base, at, stop):
                if record.kind == PAD:
                    if out:
                        return out
                    gap_from = at if gap_from is None else gap_from
                elif gap_from is not None:
                    raise LogGap(gap_from, record.offset, "a pad or a segment's lost end", path.name)
                else:
                    out.append(record)
                    taken += len(record.payload)
                    if taken >= max_bytes:
                        return out
                at = record.end
        except CorruptRecord as exc:
            if out:
                return out
            if gap_from is not None:
                raise LogGap(gap_from, exc.offset, "a pad or a segment's lost end", path.name) from None
            raise
        if at < stop:  # the file ends before the next segment's base: its end was lost
            if out:
                return out
            gap_from = at if gap_from is None else gap_from
        at = stop
    if gap_from is not None:
        raise LogGap(gap_from, at, "a pad or a segment's lost end")
    return out


def pad(fd: int, at: int, size: int) -> None:
    """Write a pad record of ``size`` bytes (at least a header's) at file position ``at`` of the
    open segment ``fd``, the file ending with it: zeros, sparse where the file system can."""
    length = size - HEADER.size
    crc, zeros = zlib.crc32(bytes((PAD,))), bytes(min(length, _RESYNC_CHUNK))
    for done in range(0, length, len(zeros) or 1):
        crc = zlib.crc32(zeros[: length - done], crc)
    os.ftruncate(fd, at)
    os.pwrite(fd, HEADER.pack(length, crc, PAD), at)
    os.ftruncate(fd, at + size)


def fsync_dir(directory: Path) -> None:
    """Make a new or removed segment file's name durable (its directory entry)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
