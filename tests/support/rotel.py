"""rotel, a real OpenTelemetry collector (Rust; PyPI ``rotel``, a pre-release), for collector-hop tests.

Installed once into ``.cache/rotel/<version>`` of the checkout (never into the project's venv or
its dependencies); :func:`agent` returns the ``rotel-agent`` binary or raises
:class:`RotelUnavailable` saying why it could not be had.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

VERSION = "0.0.1a15"
REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "rotel" / VERSION


class RotelUnavailable(RuntimeError):
    pass


def _installers() -> list[list[str]]:
    commands = []
    uv_dirs = sorted(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")).glob("tracescorer/uv-*/bin/uv"))
    for uv in [shutil.which("uv"), *map(str, uv_dirs)]:
        if uv:
            commands.append(
                [
                    uv,
                    "pip",
                    "install",
                    "--python",
                    sys.executable,
                    "-q",
                    "--prerelease",
                    "allow",
                    "--no-deps",
                    "--target",
                ]
            )
    for python in (sys.executable, shutil.which("python3")):
        if python:
            commands.append(
                [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--pre", "--no-deps", "--target"]
            )
    return commands


def agent() -> Path:
    binary = CACHE / "rotel" / "rotel-agent"
    if binary.exists():
        return binary
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    with open(CACHE.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():
            return binary
        errors = []
        for command in _installers():
            out = subprocess.run(
                [*command, str(CACHE), f"rotel=={VERSION}"], capture_output=True, text=True, timeout=300
            )
            if out.returncode == 0 and binary.exists():
                binary.chmod(0o755)
                return binary
            errors.append(f"{command[0]}: {(out.stderr or out.stdout).strip()[-300:]}")
        raise RotelUnavailable(f"cannot install rotel=={VERSION}: " + " | ".join(errors or ["no pip or uv"]))
