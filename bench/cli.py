"""CLI start-up benchmark: CPU time of ``tracescorer`` commands against ``python -c pass``.

    .venv/bin/python bench/cli.py [--repeat 5]

Each command runs as a child process; its CPU time (user + system, from ``wait4``) is measured
and the median over ``--repeat`` runs printed next to the bare interpreter's, measured in the
same run. Read commands run on a small database file (offline: the file opened read-only), and
``query`` once more through a running daemon (the ops API). Target: ``--help`` and ``query``
within 0.3 s of CPU.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TRACESCORER = [sys.executable, "-m", "tracescorer"]


def cpu_seconds(argv: list[str], env: dict[str, str]) -> float:
    """User + system CPU seconds of one run of ``argv`` (which must succeed)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(
            f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.read().decode() if proc.stderr else ''}"
        )
    return usage.ru_utime + usage.ru_stime


def median_cpu(argv: list[str], env: dict[str, str], repeat: int) -> float:
    cpu_seconds(argv, env)  # warm the page cache and __pycache__
    return statistics.median(cpu_seconds(argv, env) for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        db = Path(tmp) / "ts.duckdb"
        config = Path(tmp) / "tracescorer.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "receiver": {"grpc": {"host": "127.0.0.1", "port": 0}, "http": {"host": "127.0.0.1", "port": 0}},
                    "api": {"port": 0},
                    "store": {"path": str(db)},
                    "scorers": [{"id": "non-empty", "prebuilt": "non_empty_response"}],
                    "log_level": "WARNING",
                }
            )
        )
        cfg = ["--config", str(config)]
        # create the database with the daemon itself, then stop it: the offline commands read the file
        daemon = subprocess.Popen(
            [*TRACESCORER, "serve", *cfg], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT
        )
        from tracescorer.control import wait_for_daemon

        if wait_for_daemon(str(db), daemon) is None:
            raise SystemExit("the daemon did not start")
        cases = {"query (daemon running)": [*TRACESCORER, "query", "SELECT count(*) FROM spans", *cfg]}
        online = {name: median_cpu(argv, env, args.repeat) for name, argv in cases.items()}
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)
        baseline = median_cpu([sys.executable, "-c", "pass"], env, args.repeat)
        offline_cases = {
            "--help": [*TRACESCORER, "--help"],
            "query (file)": [*TRACESCORER, "query", "SELECT count(*) FROM spans", *cfg],
            "scores (file)": [*TRACESCORER, "scores", *cfg],
            "runs (file)": [*TRACESCORER, "runs", *cfg],
        }
        started = time.perf_counter()
        results = {name: median_cpu(argv, env, args.repeat) for name, argv in offline_cases.items()}
        results.update(online)
    print(
        f"CLI start-up, median CPU seconds (user+sys) of {args.repeat} runs "
        f"({time.perf_counter() - started:.1f}s wall for the offline cases)"
    )
    print(f"  {'python -c pass':<36} {baseline:6.3f}")
    for name, cpu in results.items():
        print(f"  tracescorer {name:<24} {cpu:6.3f}   (+{cpu - baseline:.3f} over the bare interpreter)")


if __name__ == "__main__":
    main()
