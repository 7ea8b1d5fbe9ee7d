"""The segment log: every accepted request, appended and synced before it is acknowledged.

Everything else (span rows, assembly, scoring) is derived from it by consumers that keep their own
offsets, so a crash loses nothing acknowledged and a restart is a replay. See
:mod:`tracescorer.seglog.log` (appends, group commit, reading),
:mod:`tracescorer.seglog.segments` (files, framing, reading past damage) and
:mod:`tracescorer.seglog.damage` (the repair at open, reports of what damage loses).
"""

from tracescorer.seglog.damage import Damage
from tracescorer.seglog.log import LogClosed, LogError, LogFull, SegmentLog, build_segment_log
from tracescorer.seglog.segments import LOGS, TRACES, CorruptRecord, LogGap, Record, written_since
from tracescorer.seglog.view import LogReader, LogView

__all__ = [
    "LOGS",
    "TRACES",
    "CorruptRecord",
    "Damage",
    "LogClosed",
    "LogError",
    "LogFull",
    "LogGap",
    "LogReader",
    "LogView",
    "Record",
    "SegmentLog",
    "build_segment_log",
    "written_since",
]
