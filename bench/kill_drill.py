"""kill -9 of the daemon under load, N times: its store process commits what it was sent and exits
0 each time, and nothing acknowledged is lost.

Each round starts ``tracescorer serve`` on the same file, runs the reference load
(bench/reference/otlp_load.py) against it and kills the daemon with SIGKILL a moment into the
load. This script is a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``), so the orphaned store
process becomes its child and its exit status can be read. At the end a daemon is started once
more and, once its feed stored what the segment log still held, the spans stored are counted
against the spans the load generator saw acknowledged (``store.spans: all``: the span rows, a copy the
span-rows feed derives from the log, are what shows every acknowledged span). The worker processes (orphans too) are
reaped and their exit statuses reported.

    python bench/kill_drill.py [--rounds 10] [--seconds 6]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
from benchutil import HERE, scrape, start_daemon, stop

from tracescorer import control

PR_SET_CHILD_SUBREAPER = 36


def _round(tmp: Path, seconds: float, rng: random.Random) -> dict[str, Any]:
    started = time.monotonic()
    proc, info, ports = start_daemon(tmp, {"assembly": {"idle_s": 0.5}, "store": {"spans": "all"}})
    up_s = time.monotonic() - started
    children = psutil.Process(proc.pid).children()
    [store] = [c for c in children if "tracescorer.store.duckdb.server" in " ".join(c.cmdline())]
    workers = [c for c in children if c.pid != store.pid]  # worker processes (workers.count)
    result: dict[str, Any] = {}

    def run_load() -> None:
        # no --server-pid: the server dies mid-run, and only the acknowledged count matters
        out = subprocess.run(
            [
                *(sys.executable, str(HERE / "reference/otlp_load.py"), "--mode", "http"),
                *("--target", f"http://127.0.0.1:{ports['http']}/v1/traces", "-c", "4", "--duration", str(seconds)),
            ],
            capture_output=True,
            text=True,
            timeout=seconds + 180,
        )
        result.update(json.loads(out.stdout.strip().splitlines()[-1]))

    def stored() -> int:
        return int(control.remote_query(info, "SELECT count(*) FROM spans", max_rows=1)["rows"][0][0])

    before = stored()
    loader = threading.Thread(target=run_load)
    loader.start()
    deadline = time.monotonic() + 120
    while stored() == before:
        if time.monotonic() > deadline:
            raise SystemExit("no span stored within 120 s")
        time.sleep(0.05)
    time.sleep(rng.uniform(0.0, seconds / 2))  # killed mid-load
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed = time.monotonic()
    _, status = os.waitpid(store.pid, 0)  # an orphan of the daemon: this script's child now
    exited_s = time.monotonic() - killed
    # orphans too: each stops once its daemon is gone
    worker_exits = [os.waitstatus_to_exitcode(os.waitpid(w.pid, 0)[1]) for w in workers]
    loader.join()
    return {
        "start_s": round(up_s, 2),
        "store_exit": os.waitstatus_to_exitcode(status),
        "store_exit_s": round(exited_s, 2),
        "worker_exits": worker_exits,
        "acked": int(result.get("spans_acked_total", 0)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=6.0, help="seconds of load per round (killed within)")
    args = parser.parse_args()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit("prctl(PR_SET_CHILD_SUBREAPER) failed: Linux only")
    rng = random.Random(1)
    with tempfile.TemporaryDirectory(prefix="ts-kill-") as name:
        tmp = Path(name)
        rounds = [_round(tmp, args.seconds, rng) for _ in range(args.rounds)]
        proc, info, _ports = start_daemon(tmp, {"store": {"spans": "all"}})
        try:
            # the acknowledged requests not stored before a kill are in the segment log: the feed
            # stores them after the start; count once it has caught up
            deadline = time.monotonic() + 300

            def behind() -> float:
                m = scrape(info.url)
                return m.get("tracescorer_feed_lag_bytes", 1.0) + m.get("tracescorer_span_rows_lag_bytes", 1.0)

            while behind() > 0:
                if time.monotonic() > deadline:
                    raise SystemExit("the feed did not catch up within 300 s")
                time.sleep(0.25)
            stored = control.remote_query(info, "SELECT count(*) FROM spans", max_rows=1)["rows"][0][0]
        finally:
            stop(proc)
        log = (tmp / "daemon.log").read_text(errors="replace")
    acked = sum(r["acked"] for r in rounds)
    summary = {
        "rounds": rounds,
        "store_exit_0": sum(r["store_exit"] == 0 for r in rounds),
        "acked": acked,
        "stored": stored,
        "lost": max(0, acked - stored),
        "tracebacks": log.count("Traceback"),
    }
    print(json.dumps(summary))
    return 0 if summary["store_exit_0"] == args.rounds and not summary["lost"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
