"""A daemon whose orphans can be waited for: how its store process exits once the daemon is killed
(the daemon runs under :mod:`support.subreaper`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.daemon import REPO, DaemonProcess, wait_for
from tracescorer.control import read_serve_info, serve_info_path


class ReapedDaemon(DaemonProcess):
    """:class:`~support.daemon.DaemonProcess` started under the reaper (``proc`` is the reaper)."""

    def start(self, timeout_s: float = 30.0) -> ReapedDaemon:
        serve_info_path(self.db_path).unlink(missing_ok=True)
        self.status_path = self.tmp_path / f"reaped-{os.urandom(4).hex()}.jsonl"
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "support.subreaper", str(self.status_path), "--"),
                *(sys.executable, "-m", "tracescorer", "serve", "--config", str(self.config_path)),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=str(REPO),
        )

        def ready() -> Any:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.proc.returncode}: {self.log()}")
            return read_serve_info(self.db_path)

        self.info = wait_for(ready, timeout_s, what="daemon start")
        return self

    def statuses(self) -> list[dict[str, int]]:
        path: Path = self.status_path
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    @property
    def daemon_pid(self) -> int:
        return next(s["command"] for s in self.statuses() if "command" in s)

    def exit_code(self, pid: int, timeout_s: float = 60.0) -> int:
        """The exit status of ``pid``, a descendant of the daemon, once it exited (-N: killed by signal N)."""
        found = wait_for(
            lambda: next((s for s in self.statuses() if s.get("pid") == pid), None),
            timeout_s,
            interval_s=0.1,
            what=f"process {pid} to exit",
        )
        return int(found["code"])
