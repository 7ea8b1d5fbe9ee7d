"""A small disk of its own for a test: a tmpfs mounted under the test's directory (root only)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(tmp_path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. ``"16m"``) at ``tmp_path/disk``, unmounted afterwards; the test is
    skipped where it cannot be mounted."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)], capture_output=True
    ).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def fill(path: Path) -> None:
    """Write ``path`` until the disk holds no more (unbuffered: every byte that fits is written)."""
    with open(path, "wb", buffering=0) as f:
        for size in (1 << 20, 4096, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise


def leave(path: Path, free_bytes: int) -> None:
    """Write ``path`` until its disk has about ``free_bytes`` free (at most a page less)."""
    with open(path, "wb", buffering=0) as f:
        left = shutil.disk_usage(path.parent).free - free_bytes
        while left > 0:
            left -= f.write(b"\0" * min(left, 1 << 20))
