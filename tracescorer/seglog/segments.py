"""Segment files of the log: framing, checksums, the torn tail, reading records back.

The log is a directory of segment files named by the log offset of their first byte
(``00000000000000000000.seg``, …): the log's offsets are byte positions in the concatenation of
its segments, so an offset names one record for good, across restarts and deleted segments.
A record is a 9-byte header — its payload's length (u32 big-endian), the CRC-32 of its kind byte
and payload (u32), its kind (u8) — then the payload. A record is acknowledged only once the
segment holding it was synced (:mod:`tracescorer.seglog.log`); what a crash left half-written at
the end of the last segment (a torn tail) is cut off when the log opens.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HEADER = struct.Struct(">IIB")
SUFFIX = ".seg"
#: no record is larger (a request is bounded by receiver.max_message_bytes, far below)
MAX_RECORD_BYTES = 1 << 30

TRACES, LOGS = 1, 2
KINDS = (TRACES, LOGS)


class CorruptRecord(Exception):
    """A record's header or checksum does not hold (``offset``: where it starts)."""

    def __init__(self, offset: int, why: str) -> None:
        super().__init__(f"corrupt record at log offset {offset}: {why}")
        self.offset = offset


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


def read_records(path: Path, base: int, start: int, max_bytes: int, until: int = 1 << 62) -> Iterator[Record]:
    """Records of the segment at ``path`` (base offset ``base``) from log offset ``start``, up to about
    ``max_bytes`` of payload; stops at the segment's end or at log offset ``until`` (the synced end:
    what follows may be half written). Raises :class:`CorruptRecord` at a record
    whose header or checksum does not hold (a torn tail of the segment still being written is
    cut off at open, so past it this means damage)."""
    with open(path, "rb") as fh:
        fh.seek(start - base)
        offset, taken = start, 0
        while taken < max_bytes and offset < until:
            header = fh.read(HEADER.size)
            if not header:
                return
            if len(header) < HEADER.size:
                raise CorruptRecord(offset, "the header is cut short")
            length, crc, kind = HEADER.unpack(header)
            if kind not in KINDS or length > MAX_RECORD_BYTES:
                raise CorruptRecord(offset, f"kind {kind}, length {length}")
            payload = fh.read(length)
            if len(payload) < length:
                raise CorruptRecord(offset, "the payload is cut short")
            if zlib.crc32(payload, zlib.crc32(bytes((kind,)))) != crc:
                raise CorruptRecord(offset, "checksum mismatch")
            yield Record(offset, kind, payload)
            offset += HEADER.size + length
            taken += length


def read_range(directory: Path, start: int, end: int, max_bytes: int) -> list[Record]:
    """Records of the log in ``directory`` from offset ``start`` (an offset before the oldest
    segment kept reads from it) up to the synced end ``end``, about ``max_bytes`` of payload at
    most. Blocking file I/O. Raises :class:`CorruptRecord` at a damaged record."""
    found = segments(directory)
    out: list[Record] = []
    taken = 0
    for i, (base, path) in enumerate(found):
        segment_end = found[i + 1][0] if i + 1 < len(found) else end
        if segment_end <= start:
            continue
        for record in read_records(path, base, max(start, base), max_bytes - taken, end):
            out.append(record)
            taken += len(record.payload)
        if taken >= max_bytes:
            break
    return out


def valid_length(path: Path) -> int:
    """How many bytes at the start of the segment are whole, checksummed records."""
    good = 0
    try:
        for record in read_records(path, 0, 0, 1 << 62):
            good = record.end
    except CorruptRecord:
        pass
    return good


def fsync_dir(directory: Path) -> None:
    """Make a new or removed segment file's name durable (its directory entry)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
