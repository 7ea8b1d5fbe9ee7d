"""Recovery at start against live assembly: traces/s assembled from the segment log's replay after a
restart, and traces/s assembled live, on the same reference load in the same run.

1. Live: the reference load (bench/reference/otlp_load.py) into ``tracescorer serve``; traces/s
   from the first commit to the last assembly record.
2. Recovery: the same load into a daemon that never assembles (idle_s an hour), stop it (SIGTERM,
   or ``--kill``: SIGKILL, its store and worker processes left to notice), start a normal one:
   traces/s from its start to the last assembly record.

Recovery is the feed replaying the segment log from the oldest record a trace not assembled yet
needed; ``--spans agent|all`` adds the span-rows feed (``store.spans``) to both daemons.

    python bench/recovery.py [--seconds 10] [--kill] [--spans none|agent|all]
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of load (8 clients)")
    parser.add_argument("--kill", action="store_true", help="kill -9 the daemon before recovery (default: SIGTERM)")
    parser.add_argument("--spans", choices=("none", "agent", "all"), default="none", help="store.spans of both daemons")
    args = parser.parse_args()
    spans = {"spans": args.spans}
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
