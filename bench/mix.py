"""A Collector's feed against the walk baseline: ``--mix 0.9`` (90 % of traces plain service
traces, 10 % of spans agent spans) and ``--mix 0`` (agent traces only), same payloads, same run.

Per mix, interleaved:

1. **Walk baseline** (``bench/reference/servers/null_grpc_server.py --walk``: parse + every span
   into dicts) under ``bench/reference/otlp_load.py --mix F``: acknowledged spans/s and server CPU
   per span.
2. **tracescorer serve** (``store.spans: none``, the default, or ``--store-spans agent|all``; no scorer
   bound, so the figure is the cost of taking the feed in) under the same load: acknowledged
   spans/s and CPU per span while the load runs (the acknowledgement path: check + append + sync,
   with the feed reading behind), then the whole cost once the feed caught up (daemon + store
   process CPU from the load's start until ``tracescorer_feed_lag_bytes`` is 0, per span), per
   stage from ``tracescorer_stage_cpu_seconds_total``, and triage's kept/skipped counts.

    python bench/mix.py                       # both mixes, 20 s each, about 3 minutes
    python bench/mix.py --mix 0.9 --seconds 30 --store-spans all

Prints a table per mix and one JSON summary last. Ratios are what travel between machines.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from benchutil import Tree, free_port, load, scrape, start_daemon, stop, walk_server


def _per_span_us(result: dict[str, Any]) -> float:
    return float(result["server_cpu_pct"]) / 100 / max(1e-9, float(result["spans_per_s"])) * 1e6


def baseline(mix: float, seconds: float, clients: int) -> dict[str, Any]:
    port = free_port()
    server = walk_server("grpc", port)
    try:
        result = load("grpc", f"127.0.0.1:{port}", seconds, clients, server.pid, mix)
    finally:
        stop(server)
    return {"spans_per_s": result["spans_per_s"], "cpu_us_per_span": _per_span_us(result)}


def tracescorer(mix: float, seconds: float, clients: int, spans: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ts-mix-") as tmp:
        proc, _info, ports = start_daemon(Path(tmp), {"store": {"spans": spans}})
        tree = Tree(proc.pid)
        try:
            url = f"http://127.0.0.1:{ports['http']}"
            before, cpu0, t0 = scrape(url), sum(tree.cpu().values()), time.monotonic()
            result = load("grpc", f"127.0.0.1:{ports['grpc']}", seconds, clients, proc.pid, mix)
            deadline = time.monotonic() + 600
            while scrape(url).get("tracescorer_feed_lag_bytes", 0) > 0 and time.monotonic() < deadline:
                time.sleep(0.5)
            caught_up_s = time.monotonic() - t0
            after, cpu1 = scrape(url), sum(tree.cpu().values())
        finally:
            stop(proc)
    sent = float(result["spans_acked_total"])  # the warmup's too: the CPU is counted from before it

    def delta(name: str) -> float:
        return sum(v - before.get(k, 0.0) for k, v in after.items() if k.startswith(name))

    stages = {
        k.split('stage="')[1].split('"')[0]: (v - before.get(k, 0.0)) / max(1.0, sent) * 1e6
        for k, v in after.items()
        if k.startswith("tracescorer_stage_cpu_seconds_total{")
    }
    return {
        "spans_per_s": result["spans_per_s"],
        "ack_cpu_us_per_span": _per_span_us(result),
        "total_cpu_us_per_span": (cpu1 - cpu0) / max(1.0, sent) * 1e6,
        "caught_up_s": round(caught_up_s, 1),
        "stage_cpu_us_per_span": {k: round(v, 1) for k, v in sorted(stages.items())},
        "triage_kept": delta('tracescorer_triage_items_total{decision="kept",signal="spans"}'),
        "triage_skipped": delta('tracescorer_triage_items_total{decision="skipped",signal="spans"}'),
        "ack_p99_ms": result.get("lat_p99_ms"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mix", type=float, action="append", help="share of plain traces (repeatable); default 0.9 and 0")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--store-spans", choices=("none", "agent", "all"), default="none")
    args = ap.parse_args()
    summary: dict[str, Any] = {}
    for mix in args.mix or [0.9, 0.0]:
        walk = baseline(mix, args.seconds, args.clients)
        ts = tracescorer(mix, args.seconds, args.clients, args.store_spans)
        row = {
            "walk": walk,
            "tracescorer": ts,
            "throughput_ratio": ts["spans_per_s"] / max(1e-9, walk["spans_per_s"]),
            "ack_cpu_ratio": ts["ack_cpu_us_per_span"] / max(1e-9, walk["cpu_us_per_span"]),
            "total_cpu_ratio": ts["total_cpu_us_per_span"] / max(1e-9, walk["cpu_us_per_span"]),
        }
        summary[f"mix {mix:g}"] = row
        print(f"--mix {mix:g} (store.spans: {args.store_spans})")
        print(f"  walk baseline  {walk['spans_per_s']:>9.0f} spans/s  {walk['cpu_us_per_span']:6.1f} µs CPU/span")
        print(
            f"  tracescorer    {ts['spans_per_s']:>9.0f} spans/s  {ts['ack_cpu_us_per_span']:6.1f} µs CPU/span while "
            f"loaded, {ts['total_cpu_us_per_span']:6.1f} µs/span until the feed caught up ({ts['caught_up_s']} s)"
        )
        print(
            f"  ratios         throughput {row['throughput_ratio']:.2f}x walk, CPU/span {row['ack_cpu_ratio']:.2f}x "
            f"(loaded) / {row['total_cpu_ratio']:.2f}x (whole)"
        )
        print(
            f"  stages µs/span {ts['stage_cpu_us_per_span']}; triage kept {ts['triage_kept']:.0f}, "
            f"skipped {ts['triage_skipped']:.0f} spans"
        )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
