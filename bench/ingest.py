"""Ingest throughput: tracescorer's receivers (acknowledged after commit) against the walk baseline.

The reference load (bench/reference/otlp_load.py: agent-shaped 4-span traces, 2,380 B/span, 200
spans/request, every span unique) over gRPC and OTLP/HTTP protobuf, against the walk baseline
(bench/reference/servers, ``--walk``: parse + every span into dicts) and ``tracescorer serve`` in
the same run, reps interleaved. Assembly is kept out of the way (idle_s and max_wait_s an hour,
no scorers) so this measures ingest alone: receive, decode, commit to the span log, acknowledge.
Prints spans/s, ack latency p50/p99, server CPU µs per span, max RSS and the ratios; bounded.

    python bench/ingest.py [--seconds 8] [--clients 8] [--reps 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchutil import cpu_us_per_span, free_port, load, start_daemon, stop, walk_server

INGEST_ONLY = {"assembly": {"idle_s": 3600, "max_wait_s": 3600, "max_traces": 1_000_000, "max_spans": 0}}


def one(kind: str, mode: str, seconds: float, clients: int) -> dict[str, Any]:
    if kind == "walk":
        port = free_port()
        server = walk_server(mode, port)
        try:
            target = f"127.0.0.1:{port}" if mode == "grpc" else f"http://127.0.0.1:{port}/v1/traces"
            return load(mode, target, seconds, clients, server.pid)
        finally:
            stop(server, 10)
    with tempfile.TemporaryDirectory(prefix="ts-ingest-") as tmp:
        proc, _, ports = start_daemon(Path(tmp), INGEST_ONLY)
        try:
            target = f"127.0.0.1:{ports['grpc']}" if mode == "grpc" else f"http://127.0.0.1:{ports['http']}/v1/traces"
            return load(mode, target, seconds, clients, proc.pid)
        finally:
            stop(proc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{'':28s} {'spans/s':>9s} {'p50 ms':>7s} {'p99 ms':>7s} {'CPU µs/span':>12s} {'RSS MB':>7s} {'other CPU %':>11s}"
    )
    for mode in ("grpc", "http"):
        runs: dict[str, list[dict[str, Any]]] = {"walk": [], "tracescorer": []}
        for _ in range(args.reps):
            for kind in ("walk", "tracescorer"):
                runs[kind].append(one(kind, mode, args.seconds, args.clients))
        med = {
            k: {
                m: statistics.median(r[m] for r in v)
                for m in ("spans_per_s", "lat_p50_ms", "lat_p99_ms", "server_rss_max_mb", "other_cpu_pct")
            }
            | {"cpu": statistics.median(cpu_us_per_span(r) for r in v)}
            for k, v in runs.items()
        }
        for kind, m in med.items():
            print(
                f"{mode + ' ' + kind:28s} {m['spans_per_s']:9,.0f} {m['lat_p50_ms']:7.1f} {m['lat_p99_ms']:7.1f} "
                f"{m['cpu']:12.1f} {m['server_rss_max_mb']:7.0f} {m['other_cpu_pct']:11.0f}"
            )
        ratio = med["tracescorer"]["spans_per_s"] / med["walk"]["spans_per_s"]
        cpu = med["tracescorer"]["cpu"] / med["walk"]["cpu"]
        print(
            f"{mode + ' ratio':28s} {ratio:9.2f}x walk throughput, {cpu:.1f}x walk CPU per span (medians of {args.reps})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
