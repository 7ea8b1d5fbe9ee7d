"""What triage knew before a restart, learnt again from the requests still in the segment log."""

from __future__ import annotations

import time
from collections.abc import Callable

from tracescorer.feed.triage import Owns, Triage
from tracescorer.seglog import LOGS, LogGap, LogReader, written_since


def recall_handled(
    segment_log: LogReader,
    triage: Triage,
    handled: Callable[[int], bool],
    owner: Callable[[int], Owns | None],
    max_batch_bytes: int,
) -> int:
    """Show ``triage`` the requests still in the log that were ``handled`` before this start (by
    offset), from the oldest segment written within triage's longer window (which traces hold
    agent content: ``agent_window_s``; the log keeps segments while triage may read them back,
    older ones only by ``retain_bytes``); how many (blocking: run in a thread)."""
    recent = written_since(segment_log.directory, time.time() - triage.agent_window_s)
    if recent is None:
        return 0
    at, count = max(recent, segment_log.start_offset), 0
    while True:
        try:
            records = segment_log.read(at, max_batch_bytes)
        except LogGap as exc:  # damaged bytes (the feed reports them) or none: only those are skipped
            at = exc.resume
            continue
        for record in records:
            if not handled(record.offset):
                return count
            triage.recall(record.payload, record.offset, logs=record.kind == LOGS, owns=owner(record.offset))
            count += 1
        if not records:
            return count
        at = records[-1].end
