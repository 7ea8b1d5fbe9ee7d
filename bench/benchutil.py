"""Helpers shared by the benchmark scripts (run as `python bench/NAME.py`)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from tracescorer import control  # noqa: E402


def rss_bytes(pid: int) -> int:
    """Resident set size of a process from /proc (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Tree:
    """A process and its children: CPU seconds (daemon and store process apart) and RSS."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)

    def procs(self) -> list[psutil.Process]:
        try:
            return [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return []

    @staticmethod
    def _role(p: psutil.Process) -> str:
        return "store" if "tracescorer.store.duckdb.server" in " ".join(p.cmdline()) else "daemon"

    def cpu(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for p in self.procs():
            try:
                t = p.cpu_times()
                name = self._role(p)
                out[name] = out.get(name, 0.0) + t.user + t.system
            except psutil.Error:
                pass
        return out

    def main_thread_cpu(self) -> float:
        """CPU seconds of the daemon's main thread (its event loop: one core at most, the GIL)."""
        try:
            return next((t.user_time + t.system_time for t in self.root.threads() if t.id == self.root.pid), 0.0)
        except psutil.Error:
            return 0.0

    def rss_by_role(self) -> dict[str, int]:
        """RSS bytes of the daemon and the store process apart."""
        out: dict[str, int] = {}
        for p in self.procs():
            try:
                name = self._role(p)
                out[name] = out.get(name, 0) + p.memory_info().rss
            except psutil.Error:
                pass
        return out

    def rss(self) -> int:
        return sum(self.rss_by_role().values())


def load(mode: str, target: str, seconds: float, clients: int, server_pid: int, mix: float = 0.0) -> dict[str, Any]:
    """One run of the reference load generator (bench/reference/otlp_load.py, ``--mix`` the share
    of plain service traces); its JSON line."""
    out = subprocess.run(
        [
            sys.executable,
            str(HERE / "reference/otlp_load.py"),
            "--mode",
            mode,
            "--target",
            target,
            "-c",
            str(clients),
            "--duration",
            str(seconds),
            "--server-pid",
            str(server_pid),
            "--mix",
            str(mix),
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 180,
    )
    if out.returncode != 0 or not out.stdout.strip():
        raise SystemExit(f"load generator failed: {out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def walk_server(mode: str, port: int) -> subprocess.Popen[bytes]:
    """The walk baseline receiver (parse + every span into dicts) of bench/reference/servers."""
    script = "null_grpc_server.py" if mode == "grpc" else "null_http_server.py"
    extra = [] if mode == "grpc" else ["--impl", "aiohttp"]
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "reference/servers" / script), "--port", str(port), "--walk", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.5)
    return proc


def stop(proc: subprocess.Popen[Any], timeout_s: float = 120) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout_s)


def start_daemon(
    tmp: Path, config: dict[str, Any]
) -> tuple[subprocess.Popen[bytes], control.ServeInfo, dict[str, int]]:
    """``tracescorer serve`` on free loopback ports with ``config`` merged in; its process, state
    file and ports."""
    ports = {"grpc": free_port(), "http": free_port()}
    cfg: dict[str, Any] = {
        "receiver": {
            "grpc": {"host": "127.0.0.1", "port": ports["grpc"]},
            "http": {"host": "127.0.0.1", "port": ports["http"]},
        },
        "api": {"host": "127.0.0.1", "port": 0},
        "store": {"path": str(tmp / "ts.duckdb")},
        "log_level": "WARNING",
    }
    for key, value in config.items():
        if isinstance(value, dict):
            cfg.setdefault(key, {}).update(value)
        else:
            cfg[key] = value
    path = tmp / "tracescorer.yaml"
    path.write_text(yaml.safe_dump(cfg))
    log = open(tmp / "daemon.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracescorer", "serve", "--config", str(path)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=str(REPO),
    )
    info = control.wait_for_daemon(str(tmp / "ts.duckdb"), proc, timeout_s=60)
    if info is None:
        raise SystemExit(f"daemon did not start: {(tmp / 'daemon.log').read_text()[-2000:]}")
    return proc, info, ports


def scrape(url: str) -> dict[str, float]:
    """A /metrics page as {sample line name with labels: value}."""
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def cpu_us_per_span(result: dict[str, Any]) -> float:
    """Server CPU per acknowledged span from a load generator result."""
    return float(result["server_cpu_pct"]) / 100 / max(1e-9, float(result["spans_per_s"])) * 1e6
