"""Stepped end-to-end throughput: the highest offered (paced) rate at which every trace is
assembled and scored in time, against the walk baseline measured in the same run; then 2x overload.
(Agent traces only; ``bench/sustained.py`` measures both feeds, ``--mix 0.9`` and ``--mix 0``,
flat out.)

1. **Walk baseline**: ``bench/reference/servers/null_grpc_server.py --walk`` (parse + every span
   into dicts) under the reference load (``bench/reference/otlp_load.py``: agent-shaped 4-span
   traces, 2,380 B/span, 200 spans/request, 8 clients): spans/s and server CPU per span.
2. **Steps**: ``tracescorer serve`` with two code scorers bound, offered an open-loop paced rate
   that steps up (a fraction of the baseline each step). Per step: spans/s acknowledged, ack
   latency p50/p99, refusals by code and by the bound refused for, RSS first/max/last (daemon +
   store process), server CPU µs per span per stage (decode, assembly, scoring and receiving in
   the daemon process; the store process), and the lag from a trace's last commit to its scores
   being stored (p50/p99); and what bounds the rate: the share of one core the daemon's main
   thread (its event loop, which holds the GIL) was busy, the share of the machine's cores busy,
   and the load generator's own CPU per span (it runs in this process, on the same cores). A step
   is *sustained* when every trace it sent was assembled and scored by both scorers with lag p99
   ≤ idle_s + 2 s and nothing was refused.
3. **Overload** (``--overload-s``): 2x the highest sustained rate for a while, RSS sampled to show
   it stays flat and within the configured bound, every refusal retryable, and rows = acked.

    python bench/stepped.py                     # about 9 minutes
    python bench/stepped.py --overload-s 600    # with the 10-minute 2x overload

Bounded: every phase stops by itself. Prints one table per phase and a JSON summary last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import psutil
import yaml
from benchutil import HERE, Tree, cpu_us_per_span, free_port, load, scrape, start_daemon, stop, walk_server

sys.path.insert(0, str(HERE / "reference"))
from otlp_load import EXPORT_METHOD, Patcher, build_templates

from tracescorer import control

SPANS_PER_REQUEST = 200
IDLE_S = 2.0


# --- processes ------------------------------------------------------------------------------------


def run_baseline(seconds: float, clients: int) -> dict[str, Any]:
    port = free_port()
    server = walk_server("grpc", port)
    try:
        result = load("grpc", f"127.0.0.1:{port}", seconds, clients, server.pid)
    finally:
        stop(server, 10)
    return {
        "spans_per_s": result["spans_per_s"],
        "cpu_us_per_span": cpu_us_per_span(result),
        "p99_ms": result["lat_p99_ms"],
        "other_cpu_pct": result["other_cpu_pct"],
    }


def query(info: control.ServeInfo, sql: str) -> list[list[Any]]:
    return control.remote_query(info, sql, max_rows=100_000, timeout_s=120)["rows"]  # type: ignore[no-any-return]


# --- paced load ------------------------------------------------------------------------------------


@dataclass
class Tally:
    sent: int = 0
    acked_spans: int = 0
    latencies: list[float] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)


async def paced(
    target: str,
    rate_spans: float,
    seconds: float,
    templates: list[Any],
    patcher: Patcher,
    seq0: int,
    channels: int = 8,
    inflight: int = 32,
) -> tuple[Tally, int]:
    """Send requests at a fixed rate (open loop: a slow server does not slow the schedule down,
    up to ``inflight`` requests in flight; refused requests are not retried)."""
    tally = Tally()
    chans = [
        grpc.aio.insecure_channel(
            target, options=[("grpc.max_send_message_length", 64 << 20), ("grpc.use_local_subchannel_pool", 1)]
        )
        for _ in range(channels)
    ]
    calls = [c.unary_unary(EXPORT_METHOD, request_serializer=None, response_deserializer=None) for c in chans]
    interval = SPANS_PER_REQUEST / rate_spans
    sem = asyncio.Semaphore(inflight)
    tasks: set[asyncio.Task[None]] = set()
    seq = seq0

    async def one(i: int, data: bytes) -> None:
        t0 = time.perf_counter()
        try:
            await calls[i % channels](data, timeout=60)
            tally.latencies.append(time.perf_counter() - t0)
            tally.acked_spans += SPANS_PER_REQUEST
        except grpc.aio.AioRpcError as exc:
            key = exc.code().name
            tally.refused[key] = tally.refused.get(key, 0) + 1
        finally:
            sem.release()

    start = time.perf_counter()
    n = 0
    while (now := time.perf_counter()) - start < seconds:
        due = start + n * interval
        if due > now:
            await asyncio.sleep(due - now)
        await sem.acquire()
        tpl = templates[seq % len(templates)]
        data = patcher.payload(tpl, seq)
        task = asyncio.create_task(one(n, data))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        tally.sent += 1
        seq += 1
        n += 1
    await asyncio.gather(*tasks)
    for c in chans:
        await c.close()
    return tally, seq


# --- phases ---------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _window(start: float, end: float) -> str:
    # the traces of a step: spans committed while it ran (received_at is the commit time)
    return (
        f"SELECT trace_id, max(received_at) AS t FROM spans WHERE received_at >= to_timestamp({start}) "
        f"AND received_at <= to_timestamp({end}) GROUP BY trace_id"
    )


def wait_scored(info: control.ServeInfo, start: float, end: float, deadline_s: float) -> tuple[int, int]:
    """(traces with both scores, traces committed in the window), waiting up to ``deadline_s``."""
    stop = time.monotonic() + deadline_s
    got = want = 0
    while True:
        want, got = (
            int(v)
            for v in query(
                info,
                f"""
            WITH t AS ({_window(start, end)}),
            s AS (SELECT trace_id FROM scores WHERE trace_id IN (SELECT trace_id FROM t)
                  GROUP BY trace_id HAVING count(DISTINCT scorer_id) = 2)
            SELECT (SELECT count(*) FROM t), (SELECT count(*) FROM s)""",
            )[0]
        )
        if got >= want or time.monotonic() > stop:
            return got, want
        time.sleep(1.0)


def lag(info: control.ServeInfo, start: float, end: float) -> tuple[float, float]:
    row = query(
        info,
        f"""
        WITH last AS ({_window(start, end)}),
        scored AS (SELECT trace_id, max(created_at) AS t FROM scores WHERE trace_id IN (SELECT trace_id FROM last)
                   GROUP BY trace_id)
        SELECT quantile_cont(epoch(scored.t) - epoch(last.t), 0.5), quantile_cont(epoch(scored.t) - epoch(last.t), 0.99)
        FROM last JOIN scored USING (trace_id)""",
    )[0]
    return float(row[0] if row[0] is not None else "nan"), float(row[1] if row[1] is not None else "nan")


STAGES = ("decode", "assembly", "scoring")


class RssSampler:
    """The tree's RSS every ``interval_s`` while the ``with`` block runs (``samples``, bytes)."""

    def __init__(self, tree: Tree, interval_s: float) -> None:
        self.samples: list[int] = []
        self.by_role: dict[str, list[int]] = {}
        self._tree, self._interval_s = tree, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            split = self._tree.rss_by_role()
            self.samples.append(sum(split.values()))
            for role, rss in split.items():
                self.by_role.setdefault(role, []).append(rss)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def refused_by_bound(m0: dict[str, float], m1: dict[str, float]) -> dict[str, int]:
    """Requests the daemon refused between two scrapes, by the bound hit or shed for."""
    out = {}
    for key, value in m1.items():
        if key.startswith("tracescorer_receiver_backpressure_total{"):
            n = int(value - m0.get(key, 0))
            if n:
                out[key.split('bound="')[1].split('"')[0]] = n
    return out


def _busy_share(t0: Any, t1: Any) -> float:
    """Share of all cores' time spent busy between two ``psutil.cpu_times()``."""
    total = sum(t1) - sum(t0)
    idle = (t1.idle + getattr(t1, "iowait", 0.0)) - (t0.idle + getattr(t0, "iowait", 0.0))
    return (total - idle) / total if total > 0 else float("nan")


def step(
    info: control.ServeInfo, tree: Tree, rate: float, seconds: float, templates: list[Any], patcher: Patcher, seq: int
) -> tuple[dict[str, Any], int]:
    m0, c0 = scrape(info.url), tree.cpu()
    loop0, machine0, me0 = tree.main_thread_cpu(), psutil.cpu_times(), psutil.Process().cpu_times()
    target = f"127.0.0.1:{info.grpc_port}"
    with RssSampler(tree, 0.5) as sampler:
        start = time.time()
        tally, seq = asyncio.run(paced(target, rate, seconds, templates, patcher, seq))
        end = time.time()
        scored, want = wait_scored(info, start - 1, end + 1, deadline_s=IDLE_S + 30)
    rss = sampler.samples
    m1, c1 = scrape(info.url), tree.cpu()
    loop1, machine1, me1 = tree.main_thread_cpu(), psutil.cpu_times(), psutil.Process().cpu_times()
    spans = max(1, tally.acked_spans)
    wall = max(1e-9, end - start)
    cpu_us = {f"{k}_us": (c1.get(k, 0) - c0.get(k, 0)) / spans * 1e6 for k in ("daemon", "store")}
    for stage in STAGES:
        key = f'tracescorer_stage_cpu_seconds_total{{stage="{stage}"}}'
        cpu_us[f"{stage}_us"] = (m1.get(key, 0) - m0.get(key, 0)) / spans * 1e6
    cpu_us["receive_other_us"] = cpu_us["daemon_us"] - sum(cpu_us[f"{s}_us"] for s in STAGES)
    lag_counts = {
        float(k.split('le="')[1].split('"')[0]): m1.get(k, 0) - m0.get(k, 0)
        for k in m1
        if k.startswith("tracescorer_event_loop_lag_seconds_bucket")
    }
    total = lag_counts.get(float("inf"), 0)
    loop_p99 = min((le for le, n in sorted(lag_counts.items()) if total and n >= 0.99 * total), default=float("nan"))
    p50, p99 = lag(info, start - 1, end + 1)
    result = {
        "offered_spans_per_s": rate,
        "acked_spans_per_s": tally.acked_spans / seconds,
        "ack_p50_ms": pct(tally.latencies, 0.5) * 1000,
        "ack_p99_ms": pct(tally.latencies, 0.99) * 1000,
        "refused": tally.refused,
        "refused_by_bound": refused_by_bound(m0, m1),
        "traces_scored": scored,
        "traces_acked": want,
        "lag_p50_s": p50,
        "lag_p99_s": p99,
        "rss_first_mb": (rss[0] if rss else 0) / 2**20,
        "rss_max_mb": max(rss or [0]) / 2**20,
        "rss_last_mb": (rss[-1] if rss else 0) / 2**20,
        "loop_lag_p99_le_s": loop_p99,
        **cpu_us,
        "acked_spans": tally.acked_spans,
        # what bounds the rate: the daemon's event loop (one core, the GIL), or the machine's cores
        # (the load generator, this process, runs beside them)
        "daemon_loop_busy_pct": 100 * (loop1 - loop0) / wall,
        "machine_busy_pct": 100 * _busy_share(machine0, machine1),
        "loadgen_us": (me1.user + me1.system - me0.user - me0.system) / spans * 1e6,
    }
    result["sustained"] = bool(
        want and scored == want and want * 4 == tally.acked_spans and not tally.refused and p99 <= IDLE_S + 2
    )
    return result, seq


def overload(
    info: control.ServeInfo, tree: Tree, rate: float, seconds: float, templates: list[Any], patcher: Patcher, seq: int
) -> tuple[dict[str, Any], int]:
    """Offer ``rate`` for ``seconds`` in 30 s slices, RSS sampled every second; then check rows = acked.

    Flatness compares slice medians (the last slice against the first after warm-up, the second):
    under overload the daemon's assembly window and DuckDB's buffer pool fill and empty as
    admission closes and opens, so one sample per slice swings by a third either way and says
    little about growth. The instantaneous end-of-slice value and each slice's peak are reported too.
    """
    slices = []
    acked = 0
    m0 = scrape(info.url)
    refused: dict[str, int] = {}
    remaining = seconds
    while remaining > 0:
        dur = min(30.0, remaining)
        with RssSampler(tree, 1.0) as sampler:
            # many more requests in flight than any bound admits: the daemon must refuse, not queue
            tally, seq = asyncio.run(
                paced(f"127.0.0.1:{info.grpc_port}", rate, dur, templates, patcher, seq, inflight=256)
            )
        samples = sampler.samples
        end = tree.rss()
        acked += tally.acked_spans
        for k, v in tally.refused.items():
            refused[k] = refused.get(k, 0) + v
        samples = sorted(samples or [end])
        roles = {f"{role}_rss_median_mb": sorted(v)[len(v) // 2] / 2**20 for role, v in sampler.by_role.items()}
        slices.append(
            {
                "rss_median_mb": samples[len(samples) // 2] / 2**20,
                "rss_max_mb": samples[-1] / 2**20,
                **roles,
                "rss_end_mb": end / 2**20,
                "acked_spans_per_s": tally.acked_spans / dur,
                "ack_p99_ms": pct(tally.latencies, 0.99) * 1000,
            }
        )
        remaining -= dur
    warm = slices[1] if len(slices) > 1 else slices[0]
    return {
        "offered_spans_per_s": rate,
        "seconds": seconds,
        "slices": slices,
        "refused": refused,
        "refused_by_bound": refused_by_bound(m0, scrape(info.url)),
        "acked_spans": acked,
        "rss_after_warmup_mb": warm["rss_median_mb"],
        "rss_max_mb": max(s["rss_max_mb"] for s in slices),
        "rss_last_vs_warmup": slices[-1]["rss_median_mb"] / warm["rss_median_mb"],
        "rss_end_last_vs_warmup": slices[-1]["rss_end_mb"] / warm["rss_end_mb"],
    }, seq


def _drain(info: Any, timeout_s: float = 900.0) -> float | None:
    """Wait until the segment log's feed has handled every acknowledged request; how long it took
    (None: not within ``timeout_s``)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if scrape(info.url).get("tracescorer_feed_lag_bytes", 1.0) == 0:
            return round(time.monotonic() - started, 1)
        time.sleep(0.5)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-s", type=float, default=10.0)
    parser.add_argument(
        "--steps",
        default="0.02,0.03,0.04,0.05,0.06,0.08,0.1,0.12,0.15",
        help="offered rates as fractions of the walk baseline",
    )
    parser.add_argument("--step-s", type=float, default=45.0)
    parser.add_argument(
        "--overload-s", type=float, default=60.0, help="seconds at 2x the highest sustained rate (0 = skip)"
    )
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=YAML",
        help="override a daemon setting, e.g. --set store.compression=auto (repeatable)",
    )
    args = parser.parse_args()
    overrides: dict[str, dict[str, Any]] = {}
    for item in args.set:
        path, _, value = item.partition("=")
        section, _, key = path.partition(".")
        if not key:
            parser.error(f"--set {item!r}: expected SECTION.KEY=VALUE")
        overrides.setdefault(section, {})[key] = yaml.safe_load(value)

    baseline = run_baseline(args.baseline_s, args.clients)
    print(
        f"walk baseline: {baseline['spans_per_s']:,.0f} spans/s, {baseline['cpu_us_per_span']:.1f} µs CPU/span "
        f"(p99 {baseline['p99_ms']:.0f} ms, other CPU {baseline['other_cpu_pct']:.0f}%)",
        flush=True,
    )
    templates = build_templates(16, SPANS_PER_REQUEST)
    patcher = Patcher()
    seq = 0
    steps = []
    with tempfile.TemporaryDirectory(prefix="ts-stepped-") as tmp:
        config: dict[str, Any] = {
            "assembly": {"idle_s": IDLE_S},
            # the steps' traces are told apart by the commit times of their span rows: the span-rows
            # feed runs here (what it costs is in the figures; --set store.spans=... to change it)
            "store": {"spans": "agent"},
            "scorers": [
                {"id": "non-empty", "prebuilt": "non_empty_response"},
                {"id": "no-tool-errors", "prebuilt": "no_tool_errors"},
            ],
        }
        for section, values in overrides.items():
            config.setdefault(section, {}).update(values)
        proc, info, _ = start_daemon(Path(tmp), config)
        tree = Tree(proc.pid)
        try:
            for frac in (float(x) for x in args.steps.split(",")):
                rate = frac * baseline["spans_per_s"]
                result, seq = step(info, tree, rate, args.step_s, templates, patcher, seq)
                result["fraction_of_walk"] = frac
                steps.append(result)
                print(
                    json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in result.items()}), flush=True
                )
            good = [s for s in steps if s["sustained"]]
            best = max(good, key=lambda s: s["acked_spans_per_s"]) if good else None
            over = None
            if args.overload_s > 0:
                rate = 2 * (best["acked_spans_per_s"] if best else steps[0]["offered_spans_per_s"])
                over, seq = overload(info, tree, rate, args.overload_s, templates, patcher, seq)
                print(json.dumps(over), flush=True)
            acked_total = sum(s["acked_spans"] for s in steps) + (over["acked_spans"] if over else 0)
            drained_s = _drain(info)  # what was acknowledged is stored once the feed caught up
            rows_total = int(query(info, "SELECT count(*) FROM spans")[0][0])
        finally:
            code = stop(proc)
    summary = {
        "walk_baseline": baseline,
        "highest_sustained_spans_per_s": best["acked_spans_per_s"] if best else 0.0,
        "sustained_vs_walk": (best["acked_spans_per_s"] / baseline["spans_per_s"]) if best else 0.0,
        "cpu_us_per_span_at_best": ({k: round(v, 1) for k, v in best.items() if k.endswith("_us")} if best else {}),
        "cpu_vs_walk_at_best": ((best["daemon_us"] + best["store_us"]) / baseline["cpu_us_per_span"]) if best else None,
        "overload": over,
        "acked_spans_total": acked_total,
        "span_rows_total": rows_total,
        "rows_equal_acked": rows_total == acked_total,
        "feed_caught_up_after_s": drained_s,
        "refusals_retryable": all(
            code in ("RESOURCE_EXHAUSTED", "UNAVAILABLE")
            for s in [*steps, *([over] if over else [])]
            for code in s["refused"]
        ),
        "daemon_exit": code,
    }
    print(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
