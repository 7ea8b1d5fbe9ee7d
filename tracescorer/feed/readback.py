"""Traces read back from the segment log, at the records their items came in (``store.spans: none``).

Without span rows the segment log is the only copy of a trace's items until it is assembled.
Assembly reads a trace back when its items are not in memory: spilled out of the buffer's window,
or late items of a trace assembled before (read whole again). The feed kept the records of every
trace not assembled yet (:meth:`tracescorer.feed.position.Position.add_hold`); an assembled trace's
records stay while ``segment_log.retain_bytes`` and triage's window keep their segments.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tracescorer.feed.batch import Prefilter
from tracescorer.feed.triage import pick
from tracescorer.model import LogRecord, Span
from tracescorer.receiver import decode
from tracescorer.seglog import LOGS, LogGap, LogReader, Record

log = logging.getLogger(__name__)


def record_at(segment_log: LogReader, offset: int) -> Record | None:
    """The record at ``offset`` (blocking); None when its segment was released or it is damaged."""
    try:
        found = segment_log.read(offset, 1)
    except LogGap:
        return None
    return found[0] if found and found[0].offset == offset else None


@dataclass(slots=True)
class ReadBack:
    """What :meth:`LogTraces.load` found: each trace's spans and log records, and the traces
    that had an item in a record no longer in the log (``missing``)."""

    spans: dict[str, list[Span]] = field(default_factory=dict)
    logs: dict[str, list[LogRecord]] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)


class LogTraces:
    """Reads traces' items from given segment-log records (blocking: call :meth:`load`)."""

    def __init__(self, segment_log: LogReader, prefilter: Prefilter | None = None) -> None:
        self._log = segment_log
        self._prefilter = prefilter  # other tools' evaluations are not telemetry: left out again

    async def load(self, wanted: Mapping[str, Sequence[int]]) -> ReadBack:
        """The items of each trace (hex id -> the offsets of its records), read in a thread."""
        return await asyncio.to_thread(self.read, wanted)

    def read(self, wanted: Mapping[str, Sequence[int]]) -> ReadBack:
        by_offset: dict[int, set[bytes]] = {}
        for trace_id, offsets in wanted.items():
            raw = bytes.fromhex(trace_id)
            for offset in offsets:
                by_offset.setdefault(offset, set()).add(raw)
        out = ReadBack()
        for offset in sorted(by_offset):
            ids = by_offset[offset]
            record = record_at(self._log, offset)
            if record is None:
                out.missing.update(raw.hex() for raw in ids)
                continue
            self._add(out, record, ids)
        return out

    def _add(self, out: ReadBack, record: Record, ids: set[bytes]) -> None:
        logs = record.kind == LOGS
        picked = pick(record.payload, ids, logs=logs)
        if picked is None:
            return
        spans: Sequence[Span] = ()
        records: Sequence[LogRecord] = ()
        try:
            if logs:
                records = decode.decode_logs_protobuf(picked).records
            else:
                spans = decode.decode_traces_protobuf(picked).spans
        except decode.DecodeError as exc:  # it decoded when the feed read it: a disk fault
            log.error("segment log record at %d does not decode any more (%s)", record.offset, exc)
            out.missing.update(raw.hex() for raw in ids)
            return
        if self._prefilter is not None:
            spans, records = self._prefilter.leave(spans, records)
        for span in spans:
            out.spans.setdefault(span.trace_id, []).append(span)
        for rec in records:
            if rec.trace_id:
                out.logs.setdefault(rec.trace_id, []).append(rec)
