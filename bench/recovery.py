"""Recovery at start against live assembly: traces/s assembled from the span log after a restart,
and traces/s assembled live, on the same reference load in the same run.

1. Live: the reference load (bench/reference/otlp_load.py) into ``tracescorer serve``; traces/s
   from the first commit to the last assembly record.
2. Recovery: the same load into a daemon that never assembles (idle_s an hour), stop it, start a
   normal one: traces/s from its start to the last assembly record.

    python bench/recovery.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of load (8 clients)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ts-recovery-") as tmp:
        live_dir, rec_dir = Path(tmp) / "live", Path(tmp) / "recovery"
        live_dir.mkdir()
        rec_dir.mkdir()
        proc, info, ports = start_daemon(live_dir, {"assembly": {"idle_s": 1}})
        try:
            started = time.time()
            sent = load("grpc", f"127.0.0.1:{ports['grpc']}", args.seconds, 8, proc.pid)
            traces = sent["spans_acked_total"] // 4
            last = _wait(info, traces)
            live = traces / (last - started)
        finally:
            stop(proc)
        proc, info, ports = start_daemon(
            rec_dir, {"assembly": {"idle_s": 3600, "max_wait_s": 3600, "max_traces": 1_000_000}}
        )
        try:
            sent = load("grpc", f"127.0.0.1:{ports['grpc']}", args.seconds, 8, proc.pid)
        finally:
            stop(proc)
        traces = sent["spans_acked_total"] // 4
        started = time.time()
        proc, info, _ = start_daemon(rec_dir, {"assembly": {"idle_s": 1}})
        try:
            last = _wait(info, traces)
            recovered = traces / (last - started)
        finally:
            stop(proc)
    print(f"live assembly:       {live:8,.0f} traces/s (load included)")
    print(f"recovery at start:   {recovered:8,.0f} traces/s ({traces:,} traces, from the daemon's start)")
    print(f"recovery / live:     {recovered / live:8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
