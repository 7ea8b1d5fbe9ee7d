"""Helpers shared by the benchmark scripts (run as `python bench/NAME.py`)."""

from __future__ import annotations

from pathlib import Path


def rss_bytes(pid: int) -> int:
    """Resident set size of a process from /proc (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
