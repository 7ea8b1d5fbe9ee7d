"""A batch of segment-log records decoded for the feed (in a worker thread).

With triage, only what may be part of a run is decoded, plus the earlier skipped items of traces
that turn out to hold agent content, read back from their records. A :class:`Prefilter` takes
items out of each request before its rows are stored (other tools' evaluations:
:mod:`tracescorer.calibration.intake`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tracescorer.feed.triage import Owns, Sorted, Triage, cut_owned, pick
from tracescorer.feed.wire import WireError
from tracescorer.model import LogRecord, Span
from tracescorer.receiver import decode
from tracescorer.records.skipped import SkippedTrace
from tracescorer.seglog import LOGS, Record

log = logging.getLogger(__name__)


class Prefilter(Protocol):
    """Takes items out of each decoded request before its rows are stored, and stores them itself."""

    def take(
        self, spans: Sequence[Span], logs: Sequence[LogRecord]
    ) -> tuple[Sequence[Span], Sequence[LogRecord], Sequence[Any]]:
        """The spans and log records left to store, and what was taken (called in a worker thread)."""
        ...

    async def store(self, taken: Sequence[Any]) -> None:
        """Keep what :meth:`take` took from a batch (before the batch's rows are stored)."""
        ...

    def leave(self, spans: Sequence[Span], logs: Sequence[LogRecord]) -> tuple[Sequence[Span], Sequence[LogRecord]]:
        """What :meth:`take` leaves of items read back again (nothing counted, nothing kept)."""
        ...


@dataclass(slots=True)
class Batch:
    spans: list[Span] = field(default_factory=list)
    logs: list[LogRecord] = field(default_factory=list)
    span_offsets: list[int] = field(default_factory=list)
    log_offsets: list[int] = field(default_factory=list)
    skipped: list[SkippedTrace] = field(default_factory=list)
    rejected: int = 0
    end: int = 0  # the offset after the batch's last record
    # per record: where its spans and log records end in the lists (handed on a record at a time)
    cuts: list[tuple[int, int]] = field(default_factory=list)
    # what triage did: (signal, decision) -> items
    triaged: dict[tuple[str, str], int] = field(default_factory=dict)
    lost_traces: int = 0  # skipped items that could not be read back (segment released)
    taken: list[Any] = field(default_factory=list)  # what the prefilter took out
    prefilter: Prefilter | None = None
    cpu_s: float = 0.0  # the decoding thread's CPU time for the batch (triage and decode)

    def count(self, signal: str, decision: str, n: int) -> None:
        if n:
            self.triaged[signal, decision] = self.triaged.get((signal, decision), 0) + n

    def add(self, payload: bytes, offset: int, logs: bool) -> None:
        """Decode one request's protobuf into the batch."""
        spans: Sequence[Span]
        records: Sequence[LogRecord]
        if logs:
            decoded_logs = decode.decode_logs_protobuf(payload)
            spans, records = (), decoded_logs.records
            self.rejected += decoded_logs.rejected
        else:
            traces = decode.decode_traces_protobuf(payload)
            spans, records = traces.spans, ()
            self.rejected += traces.rejected
        if self.prefilter is not None and (spans or records):
            spans, records, taken = self.prefilter.take(spans, records)
            self.taken += taken
        self.spans += spans
        self.span_offsets += [offset] * len(spans)
        self.logs += records
        self.log_offsets += [offset] * len(records)

    def note_skipped(self, sorted_: Sorted, offset: int, logs: bool) -> None:
        signal = "logs" if logs else "spans"
        for trace_id, entry in sorted_.skipped.items():
            self.count(signal, "skipped", entry.items)
            if trace_id:  # log records without a trace belong to no run: counted only
                self.skipped.append(
                    SkippedTrace(
                        trace_id=trace_id.hex(),
                        service_name=entry.service if isinstance(entry.service, str) else None,
                        span_count=0 if logs else entry.items,
                        log_count=entry.items if logs else 0,
                        log_offset=offset,
                    )
                )


def decode_batch(
    records: Sequence[Record],
    triage: Triage | None,
    read_back: Callable[[int], Record | None],
    prefilter: Prefilter | None = None,
    owner: Callable[[int], Owns | None] | None = None,
) -> Batch:
    """Decode a batch of records (in a worker thread): with ``triage``, only what may be part of a
    run, and the earlier skipped items of traces that turn out to hold agent content; with
    ``owner`` (a record's offset -> which traces the feed takes from it), only those traces' items."""
    started = time.thread_time()
    batch = Batch(prefilter=prefilter)
    if triage is not None:
        triage.expire()
    for record in records:
        batch.end = record.end
        logs = record.kind == LOGS
        signal = "logs" if logs else "spans"
        owns = owner(record.offset) if owner is not None else None
        try:
            if triage is None:
                payload = record.payload if owns is None else _own(record.payload, owns, logs)
                if payload is not None:
                    batch.add(payload, record.offset, logs)
            else:
                sorted_ = triage.sort(record.payload, record.offset, logs=logs, owns=owns)
                batch.note_skipped(sorted_, record.offset, logs)
                batch.count(signal, "kept", sorted_.kept_items)
                if sorted_.kept is not None:
                    batch.add(sorted_.kept, record.offset, logs)
                    _read_back(batch, triage, triage.late(sorted_.kept_traces), read_back)
        except decode.DecodeError as exc:  # checked before it was appended: only a bug gets here
            log.error("segment log record at %d does not decode (%s): skipped", record.offset, exc)
            batch.rejected += 1
        batch.cuts.append((len(batch.spans), len(batch.logs)))
    batch.cpu_s = time.thread_time() - started
    return batch


def _own(payload: bytes, owns: Owns, logs: bool) -> bytes | None:
    """The items of the traces ``owns`` owns (a payload that does not parse: the owner of items
    without a trace's, so the decoder says what is wrong with it once)."""
    try:
        return cut_owned(payload, owns, logs=logs)
    except WireError:
        return payload if owns(b"") else None


def _read_back(
    batch: Batch, triage: Triage, late: dict[int, set[bytes]], read_back: Callable[[int], Record | None]
) -> None:
    """Add the items of ``late`` traces from the earlier records they were skipped in."""
    for offset, trace_ids in sorted(late.items()):
        record = read_back(offset)
        if record is None:
            batch.lost_traces += len(trace_ids)
            log.warning(
                "segment log: %d trace(s) skipped at offset %d showed agent content later, after that "
                "segment was released; their earlier spans are not part of their runs",
                len(trace_ids),
                offset,
            )
            continue
        logs = record.kind == LOGS
        picked = pick(record.payload, trace_ids, logs=logs)
        if picked is not None:
            before = len(batch.logs) if logs else len(batch.spans)
            batch.add(picked, record.offset, logs)
            after = len(batch.logs) if logs else len(batch.spans)
            batch.count("logs" if logs else "spans", "read_back", after - before)
