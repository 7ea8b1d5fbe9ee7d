"""The segment log: every accepted request, appended and synced before it is acknowledged.

Everything else (span rows, assembly, scoring) is derived from it by consumers that keep their own
offsets, so a crash loses nothing acknowledged and a restart is a replay. See
:mod:`tracescorer.seglog.log` (appends, group commit, reading) and
:mod:`tracescorer.seglog.segments` (files, framing, the torn tail).
"""

from tracescorer.seglog.log import LogClosed, LogError, LogFull, SegmentLog, build_segment_log
from tracescorer.seglog.segments import LOGS, TRACES, CorruptRecord, Record, written_since
from tracescorer.seglog.view import LogReader, LogView

__all__ = [
    "LOGS",
    "TRACES",
    "CorruptRecord",
    "LogClosed",
    "LogError",
    "LogFull",
    "LogReader",
    "LogView",
    "Record",
    "SegmentLog",
    "build_segment_log",
    "written_since",
]
