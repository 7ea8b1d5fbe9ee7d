"""Damage to the segment log: the repair at open, and the report of what it loses.

At open (:func:`repair`) the last segment is read whole. A damaged stretch with whole records
after it stays where it is (readers skip it: :mod:`tracescorer.seglog.segments`). A tail after
which nothing whole follows — a write a crash tore before its sync, or damage to the last
records — is replaced by a pad record at least as long, so the log's end does not move back and
no offset a consumer may have saved is handed out again. A segment that ends before the next
one's base lost its end; readers skip the gap. Each loss, found at open or skipped by a feed,
is counted on ``/metrics`` (``tracescorer_log_damaged_records`` and ``_bytes``, by where) and
logged at ERROR with its segment file and log offsets (:func:`report`).
"""

from __future__ import annotations

import itertools
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracescorer.metrics.ingest import IngestFamilies
from tracescorer.seglog.segments import HEADER, CorruptRecord, pad, scan

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Damage:
    """Bytes of the log lost: log offsets ``start`` to ``end`` of the segment file ``segment``."""

    segment: str
    start: int
    end: int
    why: str

    @classmethod
    def skipped(cls, exc: CorruptRecord) -> Damage:
        """The damaged stretch a reader skipped."""
        return cls(exc.segment, exc.offset, exc.resume, f"damaged bytes skipped ({exc.why})")

    def describe(self) -> dict[str, Any]:
        """As ``/readyz`` shows it."""
        return {"segment": self.segment, "from": self.start, "to": self.end, "why": self.why}


def report(damage: Damage, where: str, metrics: IngestFamilies | None) -> None:
    """Count ``damage`` (found at ``where``: open, read) and log it at ERROR."""
    if metrics is not None:
        metrics.log_damaged.labels(where).inc()
        metrics.log_damaged_bytes.labels(where).inc(damage.end - damage.start)
    log.error(
        "segment log (%s): %s: log offsets %d to %d (%d byte(s)) of %s; the records there are lost",
        where,
        damage.why,
        damage.start,
        damage.end,
        damage.end - damage.start,
        damage.segment,
    )


def repair(found: list[tuple[int, Path]]) -> tuple[list[Damage], int]:
    """Check the segments ``found`` (base offset, file; oldest first) as the module docstring says,
    padding a torn tail off the last one; the damage found, and the last segment's size now."""
    damage = []
    for (base, path), (next_base, _) in itertools.pairwise(found):
        end = base + path.stat().st_size
        if end < next_base:
            damage.append(Damage(path.name, end, next_base, "the segment ends before the next one's base"))
    base, path = found[-1]
    size = path.stat().st_size
    at = good = base  # good: the end of the last whole record
    while at < base + size:
        try:
            for record in scan(path, base, at):
                good = record.end
            break
        except CorruptRecord as exc:
            if exc.resume >= base + size:  # nothing whole follows: the tail goes
                break
            damage.append(Damage.skipped(exc))
            at = exc.resume
    if good == base + size:
        return damage, size
    why = "no whole record follows: padded (a write torn by a crash before its sync, or the last records damaged)"
    damage.append(Damage(path.name, good, base + size, why))
    length = max(base + size - good, HEADER.size)  # the end stays where it was, or goes past it
    with open(path, "r+b") as fh:
        pad(fh.fileno(), good - base, length)
        os.fsync(fh.fileno())
    return damage, good - base + length
