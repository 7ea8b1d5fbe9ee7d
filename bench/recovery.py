"""Recovery at start against live assembly: traces/s assembled from the segment log's replay after a
restart, and traces/s assembled live, on the same reference load in the same run.

1. Live: the reference load (bench/reference/otlp_load.py) into ``tracescorer serve``; traces/s
   from the first commit to the last assembly record.
2. Recovery: the same load into a daemon that never assembles (idle_s an hour), stop it (SIGTERM,
   or ``--kill``: SIGKILL, its store and worker processes left to notice), start a normal one:
   traces/s from its start to the last assembly record.

Recovery is the feed replaying the segment log from the oldest record a trace not assembled yet
needed; ``--spans agent|all`` adds the span-rows feed (``store.spans``) to both daemons.

``--victim worker|store`` measures a kill under load instead: the same load into two daemons, the
second losing one worker process (or its store process) to SIGKILL a third of the way in; each
drains its backlog, and the figure is the drain time without the kill over the drain time with
it (1.0: the kill cost nothing; the daemon starts the process again and goes on).

    python bench/recovery.py [--seconds 10] [--kill] [--spans none|agent|all] [--victim worker|store]
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
from benchutil import load, start_daemon, stop

from tracescorer import control


def _assembled(info: control.ServeInfo) -> tuple[int, float]:
    row = control.remote_query(info, "SELECT count(*), epoch(max(assembled_at)) FROM assembled_traces", max_rows=1)[
        "rows"
    ][0]
    return int(row[0]), float(row[1] or 0)


def _wait(info: control.ServeInfo, traces: int, timeout_s: float = 600) -> float:
    """When the last of ``traces`` traces was assembled (epoch seconds)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        n, last = _assembled(info)
        if n >= traces:
            return last
        time.sleep(0.5)
    raise SystemExit(f"only {n} of {traces} traces assembled")


def _kill(proc: Any) -> None:
    """SIGKILL the daemon; wait until its store and worker processes, orphaned, have exited."""
    children = psutil.Process(proc.pid).children()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    _, alive = psutil.wait_procs(children, timeout=120)
    if alive:
        raise SystemExit(f"{len(alive)} process(es) of the killed daemon still run: {[p.pid for p in alive]}")


def _victim(daemon_pid: int, victim: str) -> psutil.Process:
    """The daemon's store process, or its first worker process."""
    module = "tracescorer.store.duckdb.server" if victim == "store" else "tracescorer.workers.child"
    for child in psutil.Process(daemon_pid).children():
        if module in " ".join(child.cmdline()):
            return child
    raise SystemExit(f"the daemon has no {victim} process")


def _drain(directory: Path, seconds: float, spans: dict[str, str], victim: str | None) -> tuple[float, int]:
    """Seconds from the load's start until every acknowledged trace is assembled, with ``victim``
    killed (SIGKILL) a third of the way into the load; and the traces."""
    proc, info, ports = start_daemon(directory, {"assembly": {"idle_s": 1}, "store": spans})
    try:
        timer = None
        if victim is not None:
            target = _victim(proc.pid, victim)
            timer = threading.Timer(seconds / 3, target.kill)
            timer.start()
        started = time.time()
        sent = load("grpc", f"127.0.0.1:{ports['grpc']}", seconds, 8, proc.pid)
        if timer is not None:
            timer.join()
        traces = sent["spans_acked_total"] // 4
        return _wait(info, traces) - started, traces
    finally:
        stop(proc)


def _kill_under_load(seconds: float, spans: dict[str, str], victim: str) -> int:
    with tempfile.TemporaryDirectory(prefix="ts-recovery-") as tmp:
        (Path(tmp) / "plain").mkdir()
        (Path(tmp) / "killed").mkdir()
        plain, plain_traces = _drain(Path(tmp) / "plain", seconds, spans, None)
        killed, killed_traces = _drain(Path(tmp) / "killed", seconds, spans, victim)
    print(f"store.spans: {spans['spans']}; {seconds:g} s of load, kill -9 of a {victim} process at {seconds / 3:.1f} s")
    print(f"no kill:    {plain_traces:8,} traces drained in {plain:6.1f} s ({plain_traces / plain:8,.0f} traces/s)")
    print(
        f"{victim} kill: {killed_traces:8,} traces drained in {killed:6.1f} s ({killed_traces / killed:8,.0f} traces/s)"
    )
    print(
        f"recovery / live (traces/s with the kill over without): {killed_traces / killed / (plain_traces / plain):.2f}x"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of load (8 clients)")
    parser.add_argument("--kill", action="store_true", help="kill -9 the daemon before recovery (default: SIGTERM)")
    parser.add_argument("--spans", choices=("none", "agent", "all"), default="none", help="store.spans of both daemons")
    parser.add_argument("--victim", choices=("worker", "store"), help="kill -9 this process under load instead")
    args = parser.parse_args()
    spans = {"spans": args.spans}
    if args.victim is not None:
        return _kill_under_load(args.seconds, spans, args.victim)
    with tempfile.TemporaryDirectory(prefix="ts-recovery-") as tmp:
        live_dir, rec_dir = Path(tmp) / "live", Path(tmp) / "recovery"
        live_dir.mkdir()
        rec_dir.mkdir()
        proc, info, ports = start_daemon(live_dir, {"assembly": {"idle_s": 1}, "store": spans})
        try:
            started = time.time()
            sent = load("grpc", f"127.0.0.1:{ports['grpc']}", args.seconds, 8, proc.pid)
            traces = sent["spans_acked_total"] // 4
            last = _wait(info, traces)
            live = traces / (last - started)
        finally:
            stop(proc)
        proc, info, ports = start_daemon(
            rec_dir, {"assembly": {"idle_s": 3600, "max_wait_s": 3600, "max_traces": 1_000_000}, "store": spans}
        )
        try:
            sent = load("grpc", f"127.0.0.1:{ports['grpc']}", args.seconds, 8, proc.pid)
        finally:
            if args.kill:
                _kill(proc)
            else:
                stop(proc)
        traces = sent["spans_acked_total"] // 4
        started = time.time()
        proc, info, _ = start_daemon(rec_dir, {"assembly": {"idle_s": 1}, "store": spans})
        try:
            last = _wait(info, traces)
            recovered = traces / (last - started)
        finally:
            stop(proc)
    print(f"live assembly:       {live:8,.0f} traces/s (load included)")
    how = "kill -9" if args.kill else "SIGTERM"
    print(f"store.spans: {args.spans}; recovery after {how}")
    print(f"recovery at start:   {recovered:8,.0f} traces/s ({traces:,} traces, from the daemon's start)")
    print(f"recovery / live:     {recovered / live:8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
