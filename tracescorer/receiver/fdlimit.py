"""The daemon's open-files limit: raised to the hard limit at start, and shared among the listeners.

Every connection takes a file descriptor. Under the common soft limit of 1,024, a thousand idle
connections left nothing for the next client (nor for the store's pipes, or a judge call), and
accept() failed over and over. So at start the soft limit goes up to the hard one, and the
listeners' connection caps (``receiver.max_connections``) are lowered to fit what is left, with a
reserve for everything else the process opens.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: descriptors kept for what is not a connection (store pipes, judge and export connections, files):
#: this many at least, or an eighth of the headroom
RESERVE_FDS = 64
MIN_CONNECTIONS = 8
_FD_DIRS = ("/proc/self/fd", "/dev/fd")


@dataclass(frozen=True, kw_only=True, slots=True)
class FileLimit:
    """The soft and hard RLIMIT_NOFILE after :func:`raise_open_files_limit` (``before``: the soft one it found)."""

    soft: int
    hard: int
    before: int


def raise_open_files_limit() -> FileLimit | None:
    """Raise the soft open-files limit to the hard one (None where there are no rlimits)."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # an unlimited hard limit cannot be the soft one for files (Linux caps it at fs.nr_open)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
    before = soft
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-files limit from %d to %d: %s", soft, target, exc)
    if soft != before:
        log.info("open-files limit raised from %d to %d (the hard limit)", before, soft)
    return FileLimit(soft=soft, hard=hard, before=before)


def open_files() -> int | None:
    """File descriptors this process has open now (None where that cannot be listed)."""
    for path in _FD_DIRS:
        try:
            return max(0, len(os.listdir(path)) - 1)  # less the one listdir held
        except OSError:
            continue
    return None


def headroom() -> int | None:
    """Descriptors the process may still open under its soft limit (None when unknown)."""
    try:
        import resource
    except ImportError:
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    used = open_files()
    if used is None or soft == resource.RLIM_INFINITY:
        return None
    return soft - used


def share_connections(wanted: Mapping[str, int], room: int | None) -> dict[str, int]:
    """Connection caps per listener that fit ``room`` free descriptors, less a reserve: ``wanted``
    when they fit, else each lowered in proportion (to :data:`MIN_CONNECTIONS` at least)."""
    caps = dict(wanted)
    if room is None or not caps:
        return caps
    usable = room - max(RESERVE_FDS, room // 8)
    total = sum(caps.values())
    if total <= usable:
        return caps
    return {name: max(MIN_CONNECTIONS, cap * max(0, usable) // total) for name, cap in caps.items()}


def log_room(caps: Mapping[str, int], wanted: Mapping[str, int]) -> None:
    """Log the open-files headroom at start and the connection caps it allows (a WARNING when
    ``receiver.max_connections`` had to be lowered)."""
    room = headroom()
    shown = ", ".join(f"{name} {cap}" for name, cap in caps.items())
    if room is None:
        log.info("connections allowed per receiver: %s (open files not countable here)", shown)
        return
    if caps != dict(wanted):
        log.warning(
            "the open-files limit leaves room for %d more descriptors: connections per receiver lowered to "
            "%s (receiver.max_connections %s); raise the hard limit (ulimit -Hn, systemd LimitNOFILE=, "
            "docker --ulimit nofile=) to allow more",
            room,
            shown,
            max(wanted.get("http", 0), wanted.get("grpc", 0)),
        )
    else:
        log.info("open files: headroom %d descriptors; connections allowed per receiver: %s", room, shown)
