"""Sustained end to end, per feed: a Collector's feed (``--mix 0.9``: 90 % of traces plain service
traces) and agent traces only (``--mix 0``), each against the walk baseline on the same payload in
the same run (issue 36's targets: >= 1.0x walk and >= 0.4x walk).

Per feed, one after the other:

1. **Walk baseline**: ``bench/reference/servers/null_grpc_server.py --walk`` (parse + every span
   into dicts) under ``bench/reference/otlp_load.py --mix F``: spans/s, server CPU µs per span.
2. **tracescorer serve** (a real daemon, DuckDB store, the default configuration (``store.spans: none``), two code scorers
   bound: ``non_empty_response`` and ``no_tool_errors``; ``assembly.idle_s`` 2 s) under the same
   load, flat out for ``--seconds``. Then the script waits until everything sent is handled: the
   segment log's feed lag is 0, triage counted every span (kept or skipped), and every agent trace
   sent (4 spans each; the generator's requests hold ``50 - round(50 F)`` of them) has its run and
   both scores stored (``/metrics``: ``tracescorer_feed_lag_bytes``, ``tracescorer_triage_items``,
   ``tracescorer_assembly_runs``, ``tracescorer_score_results``).

Reported per feed, in one block: acknowledged spans/s and ack p50/p99 (the load generator's);
**sustained end to end** spans/s = spans acknowledged / (first acknowledgement → all handled and
scored; the last traces' ``idle_s`` is in it); each as a ratio to walk; server CPU µs per span from
the load's start until all was handled, in total and per process (``/proc/PID/stat`` utime+stime:
the daemon, split into its event-loop thread and its other threads; the store process; query
processes), per stage as the daemon counts it (``tracescorer_stage_cpu_seconds``: the CPU time of
the thread that ran each stage: the event loop's, the decoding thread's for ``decode``) and the wall time per span of each ``*_seconds`` histogram (commits, checkpoints,
extraction); RSS before / peak / after per process; triage's kept/skipped spans, runs and scores,
and a check against the store's rows (queried after the measurement: its cost is not counted);
the time to score under the load (``tracescorer_time_to_score_seconds``: a run's end to its score
stored, p50 and p99 interpolated in its buckets as Prometheus's ``histogram_quantile`` does) of a
probe run sent every 0.5 s beside the load and scored by a binding of its own (``bench/probe.py``:
the load generator's spans carry fixed 2025 times); the probes' runs are counted in the runs wanted.

    python bench/sustained.py                           # both feeds, 20 s each, 3-5 minutes
    python bench/sustained.py --mix 0.9 --seconds 60 --json out.json

Ratios are what travel between machines; on a shared 2-core machine the load generator competes
with the daemon for the cores (its own CPU and the other processes' are printed as noise).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import yaml
from benchutil import cpu_us_per_span, free_port, load, scrape, start_daemon, stop, walk_server
from probe import BINDING, Probe

from tracescorer import control

SPANS_PER_REQUEST, TRACES_PER_REQUEST = 200, 50  # the load generator's defaults
SCORERS = [
    {"id": "non-empty", "prebuilt": "non_empty_response"},
    {"id": "no-tool-errors", "prebuilt": "no_tool_errors"},
]
IDLE_S = 2.0
TICK_S = 0.25
TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
STAGES = ("check", "decode", "assembly", "scoring")  # the pipeline's order
#: histograms of waits, not of work: the ack latency (reported from the load generator) and the loop's lag
ROLE_ORDER = ("daemon", "workers", "store", "query")
NOT_STAGES = ("receiver_request", "event_loop_lag", "time_to_score")
ROLES = (
    ("tracescorer.store.duckdb.server", "store"),
    ("tracescorer.store.duckdb.queryproc", "query"),
    ("tracescorer.workers.child", "workers"),
)


# --- /proc ------------------------------------------------------------------------------------------


def proc_stat(path: str) -> tuple[float, int] | None:
    """(utime + stime seconds, RSS bytes) from a /proc stat file; None when the process is gone."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "; fields[0] is field 3
    return (int(fields[11]) + int(fields[12])) / TICKS, int(fields[21]) * PAGE


class ProcTree:
    """The daemon and its children sampled every ``TICK_S`` from /proc: CPU seconds per process
    (a child started meanwhile counts from 0) and RSS per role (daemon, store, query)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.roles: dict[int, str] = {pid: "daemon"}
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.loop0 = self.loop1 = 0.0
        self.rss_before: dict[str, int] = {}
        self.rss_peak: dict[str, int] = {}
        self.peak_total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _role(self, pid: int) -> str:
        if pid not in self.roles:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                return "other"
            self.roles[pid] = next((role for module, role in ROLES if module in cmd), "other")
        return self.roles[pid]

    def sample(self, initial: bool = False) -> dict[str, int]:
        """Record CPU and return RSS bytes per role now (``initial``: CPU counts from here)."""
        try:
            pids = [self.pid, *(c.pid for c in psutil.Process(self.pid).children(recursive=True))]
        except psutil.Error:
            pids = []
        rss: dict[str, int] = {}
        for pid in pids:
            stat = proc_stat(f"/proc/{pid}/stat")
            if stat is None:
                continue
            self.first.setdefault(pid, stat[0] if initial else 0.0)
            self.last[pid] = stat[0]
            role = self._role(pid)
            rss[role] = rss.get(role, 0) + stat[1]
        loop = proc_stat(f"/proc/{self.pid}/task/{self.pid}/stat")
        if loop is not None:
            self.loop1 = loop[0]
        for role, n in rss.items():
            self.rss_peak[role] = max(self.rss_peak.get(role, 0), n)
        self.peak_total = max(self.peak_total, sum(rss.values()))
        return rss

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            self.sample()

    def start(self) -> None:
        self.rss_before = self.sample(initial=True)
        self.loop0 = self.loop1
        self._thread.start()

    def finish(self) -> tuple[dict[str, float], dict[str, int]]:
        """CPU seconds per role (the daemon's event-loop thread as ``loop``) and RSS now."""
        self._stop.set()
        self._thread.join()
        rss = self.sample()
        cpu: dict[str, float] = {}
        for pid, last in self.last.items():
            role = self.roles.get(pid, "other")
            cpu[role] = cpu.get(role, 0.0) + last - self.first.get(pid, 0.0)
        cpu["loop"] = self.loop1 - self.loop0
        return cpu, rss


# --- /metrics ---------------------------------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def series(metrics: dict[str, float], name: str) -> list[tuple[dict[str, str], float]]:
    """The samples of one metric name as (labels, value)."""
    out = []
    for key, value in metrics.items():
        match = _SAMPLE.match(key)
        if match and match.group(1) == name:
            out.append((dict(_LABEL.findall(match.group(2) or "")), value))
    return out


def delta(m0: dict[str, float], m1: dict[str, float], name: str, **labels: str) -> float:
    """The increase of a counter summed over the samples whose labels include ``labels``."""
    total = 0.0
    for key, value in m1.items():
        match = _SAMPLE.match(key)
        if match and match.group(1) == name:
            have = dict(_LABEL.findall(match.group(2) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                total += value - m0.get(key, 0.0)
    return total


def agent_traces(acked_spans: float, mix: float) -> int:
    """Agent traces in ``acked_spans`` of the load generator's requests (``round(50 F)`` of a
    request's 50 traces are plain)."""
    return int(acked_spans // SPANS_PER_REQUEST) * (TRACES_PER_REQUEST - round(TRACES_PER_REQUEST * mix))


def progress(m0: dict[str, float], m1: dict[str, float]) -> dict[str, float]:
    """What the daemon has handled since ``m0``."""
    out = {
        "lag_bytes": m1.get("tracescorer_feed_lag_bytes", 0.0),
        "accepted": delta(m0, m1, "tracescorer_receiver_items_accepted_total"),
        "kept": delta(m0, m1, "tracescorer_triage_items_total", signal="spans", decision="kept"),
        "skipped": delta(m0, m1, "tracescorer_triage_items_total", signal="spans", decision="skipped"),
        "runs": delta(m0, m1, "tracescorer_assembly_runs_total"),
    }
    for scorer in (*SCORERS, BINDING):
        out[f"scores {scorer['id']}"] = delta(m0, m1, "tracescorer_score_results_total", scorer=scorer["id"])
    return out


def done(p: dict[str, float], acked: float, runs: int, probes: int) -> bool:
    return (
        p["lag_bytes"] == 0
        and p["kept"] + p["skipped"] >= acked
        and p["runs"] >= runs
        and all(p[f"scores {s['id']}"] >= runs for s in SCORERS)
        and p[f"scores {BINDING['id']}"] >= probes
    )


def stage_cpu(m0: dict[str, float], m1: dict[str, float], spans: float) -> dict[str, float]:
    stages = {labels["stage"] for labels, _ in series(m1, "tracescorer_stage_cpu_seconds_total")}
    order = sorted(stages, key=lambda s: (STAGES.index(s) if s in STAGES else len(STAGES), s))
    return {s: delta(m0, m1, "tracescorer_stage_cpu_seconds_total", stage=s) / spans * 1e6 for s in order}


def histograms(m0: dict[str, float], m1: dict[str, float], spans: float) -> dict[str, dict[str, float]]:
    """Each ``*_seconds`` histogram's time per span (µs) and count since ``m0``, per label set."""
    out = {}
    for key, value in m1.items():
        match = _SAMPLE.match(key)
        if not match or not match.group(1).endswith("_seconds_sum") or any(x in key for x in NOT_STAGES):
            continue
        count = m1.get(key.replace("_seconds_sum", "_seconds_count"), 0.0)
        n = count - m0.get(key.replace("_seconds_sum", "_seconds_count"), 0.0)
        if n <= 0:
            continue
        name = match.group(1).removeprefix("tracescorer_").removesuffix("_seconds_sum")
        labels = dict(_LABEL.findall(match.group(2) or ""))
        label = ",".join(labels.values())
        out[f"{name}[{label}]" if label else name] = {"us_per_span": (value - m0.get(key, 0.0)) / spans * 1e6, "n": n}
    return out


def quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """``histogram_quantile``: the ``q`` quantile of cumulative ``(le, count)`` buckets, linear
    within the bucket it falls in (nan without observations, the last finite bound past it)."""
    buckets = sorted(buckets)
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return float("nan")
    rank, lo, below = q * total, 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if le == float("inf"):
                return lo
            return lo + (le - lo) * (rank - below) / (count - below) if count > below else le
        lo, below = le, count
    return lo


def time_to_score(m0: dict[str, float], m1: dict[str, float]) -> dict[str, dict[str, float]]:
    """Per scorer: p50, p99 and count of ``tracescorer_time_to_score_seconds`` since ``m0``."""
    by: dict[str, list[tuple[float, float]]] = {}
    for labels, _ in series(m1, "tracescorer_time_to_score_seconds_bucket"):
        le, scorer = labels["le"], labels["scorer"]
        count = delta(m0, m1, "tracescorer_time_to_score_seconds_bucket", scorer=scorer, le=le)
        by.setdefault(scorer, []).append((float(le), count))
    return {
        scorer: {"p50_s": quantile(0.5, b), "p99_s": quantile(0.99, b), "n": max(c for _, c in b)}
        for scorer, b in by.items()
    }


# --- one feed ---------------------------------------------------------------------------------------


def walk(mix: float, seconds: float, clients: int) -> dict[str, Any]:
    port = free_port()
    server = walk_server("grpc", port)
    try:
        result = load("grpc", f"127.0.0.1:{port}", seconds, clients, server.pid, mix=mix)
    finally:
        stop(server, 10)
    return {"spans_per_s": result["spans_per_s"], "cpu_us_per_span": cpu_us_per_span(result)}


def tracescorer(mix: float, seconds: float, clients: int, config: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ts-sustained-") as tmp:
        proc, info, ports = start_daemon(Path(tmp), config)
        try:
            return _measure(proc.pid, info, ports["grpc"], mix, seconds, clients)
        finally:
            stop(proc)


def _measure(
    pid: int, info: control.ServeInfo, grpc_port: int, mix: float, seconds: float, clients: int
) -> dict[str, Any]:
    tree = ProcTree(pid)
    m0 = scrape(info.url)
    result: dict[str, Any] = {}
    runner = threading.Thread(
        target=lambda: result.update(load("grpc", f"127.0.0.1:{grpc_port}", seconds, clients, pid, mix=mix))
    )
    probe = Probe(f"127.0.0.1:{grpc_port}")
    tree.start()
    runner.start()
    probe.start()
    first = load_end = caught_up = end = None
    acked, runs, probes = 0.0, 0, 0
    deadline = time.monotonic() + 10 * seconds + 120
    while time.monotonic() < deadline:
        time.sleep(TICK_S)
        now, p = time.monotonic(), progress(m0, scrape(info.url))
        if first is None and p["accepted"] > 0:
            first = now - TICK_S / 2  # between this scrape and the last
        if runner.is_alive():
            continue
        if load_end is None:
            if not result:
                raise SystemExit("the load generator failed (its error is above)")
            load_end, acked, probes = now, float(result["spans_acked_total"]), probe.finish()
            runs = agent_traces(acked, mix) + probes
        if caught_up is None and p["lag_bytes"] == 0:
            caught_up = now
        if done(p, acked, runs, probes):
            end = now
            break
    runner.join()
    probe.finish()
    m1 = scrape(info.url)
    cpu, rss_after = tree.finish()
    assert first is not None and load_end is not None, "nothing was acknowledged"
    check = control.remote_query(
        info,
        "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM (SELECT trace_id FROM scores "
        "GROUP BY trace_id HAVING count(DISTINCT scorer_id) = 2))",
        max_rows=1,
        timeout_s=120,
    )["rows"][0]
    return {
        "acked_spans_per_s": result["spans_per_s"],
        "ack_p50_ms": result["lat_p50_ms"],
        "ack_p99_ms": result["lat_p99_ms"],
        "requests_err": result["requests_err"],
        "acked_spans": acked,
        "handled": end is not None,
        "sustained_spans_per_s": acked / ((end or time.monotonic()) - first),
        "caught_up_after_load_s": (caught_up or float("nan")) - load_end,
        "scored_after_load_s": (end or float("nan")) - load_end,
        "cpu_us_per_span": {role: s / acked * 1e6 for role, s in cpu.items()},
        "stage_cpu_us_per_span": stage_cpu(m0, m1, acked),
        "histograms": histograms(m0, m1, acked),
        "time_to_score": time_to_score(m0, m1).get(BINDING["id"], {}),
        "probes": {"sent": probes, "failed": probe.failed},
        "rss_mb": {
            role: [n / 2**20 for n in (tree.rss_before.get(role, 0), tree.rss_peak[role], rss_after.get(role, 0))]
            for role in sorted(tree.rss_peak, key=lambda r: ROLE_ORDER.index(r) if r in ROLE_ORDER else len(ROLE_ORDER))
        },
        "rss_total_mb": [
            sum(tree.rss_before.values()) / 2**20,
            tree.peak_total / 2**20,
            sum(rss_after.values()) / 2**20,
        ],
        "progress": progress(m0, m1),
        "runs_wanted": runs,
        "rows": {"runs": check[0], "traces_with_both_scores": check[1]},
        "loadgen_cpu_pct": result.get("client_cpu_pct"),
        "other_cpu_pct": result.get("other_cpu_pct"),
    }


# --- output -----------------------------------------------------------------------------------------


def report(mix: float, w: dict[str, Any], t: dict[str, Any]) -> list[str]:
    cpu = t["cpu_us_per_span"]
    total = sum(v for k, v in cpu.items() if k != "loop")
    procs = ", ".join(
        f"{role} {cpu[role]:.0f}"
        + (f" (event loop {cpu['loop']:.0f}, other threads {cpu[role] - cpu['loop']:.0f})" if role == "daemon" else "")
        for role in (*ROLE_ORDER, "other")
        if role in cpu
    )
    p = t["progress"]
    scores = ", ".join(f"{k.removeprefix('scores ')} {v:,.0f}" for k, v in p.items() if k.startswith("scores "))
    hist = ", ".join(f"{k} {v['us_per_span']:.1f} ({v['n']:,.0f}x)" for k, v in t["histograms"].items())
    tts, probes = t["time_to_score"], t["probes"]
    rss = ", ".join(f"{role} {'/'.join(f'{x:.0f}' for x in v)}" for role, v in t["rss_mb"].items())
    status = "" if t["handled"] else "  NOT ALL HANDLED before the deadline"
    return [
        f"--mix {mix:g}{status}",
        f"  walk          {w['spans_per_s']:>8,.0f} spans/s  {w['cpu_us_per_span']:6.1f} µs CPU/span",
        f"  acknowledged  {t['acked_spans_per_s']:>8,.0f} spans/s  {t['acked_spans_per_s'] / w['spans_per_s']:.2f}x walk"
        f"   ack p50 {t['ack_p50_ms']:.0f} ms, p99 {t['ack_p99_ms']:.0f} ms, {t['requests_err']} failed",
        f"  end to end    {t['sustained_spans_per_s']:>8,.0f} spans/s  "
        f"{t['sustained_spans_per_s'] / w['spans_per_s']:.2f}x walk   {t['acked_spans']:,.0f} spans; feed caught up "
        f"{t['caught_up_after_load_s']:.1f} s, scored {t['scored_after_load_s']:.1f} s after the load",
        f"  CPU µs/span   {total:.0f} = {total / w['cpu_us_per_span']:.1f}x walk: {procs}",
        "  stages        CPU µs/span " + ", ".join(f"{k} {v:.1f}" for k, v in t["stage_cpu_us_per_span"].items()),
        f"                wall µs/span {hist}",
        f"  handled       triage kept {p['kept']:,.0f}, skipped {p['skipped']:,.0f} spans; runs {p['runs']:,.0f} "
        f"(want {t['runs_wanted']:,}); scores {scores}; rows: runs {t['rows']['runs']:,}, traces with both "
        f"scores {t['rows']['traces_with_both_scores']:,}",
        f"  time to score p50 {tts.get('p50_s', float('nan')):.2f} s, p99 {tts.get('p99_s', float('nan')):.2f} s "
        f"({tts.get('n', 0):,.0f} probe runs, {probes['failed']} probes refused; from a run's end, assembly.idle_s "
        f"{IDLE_S:g} s is in it)",
        f"  RSS MB        before/peak/after {'/'.join(f'{x:.0f}' for x in t['rss_total_mb'])}: {rss}",
        f"  noise         load generator {t['loadgen_cpu_pct']:.0f} %, other processes {t['other_cpu_pct']:.0f} % "
        "of a core",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mix", type=float, action="append", help="share of plain traces (repeatable); default 0.9 and 0")
    ap.add_argument("--seconds", type=float, default=20, help="load per feed, walk and tracescorer each")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=YAML", help="a daemon setting")
    ap.add_argument("--json", type=Path, help="also write every figure here")
    args = ap.parse_args()
    config: dict[str, Any] = {"assembly": {"idle_s": IDLE_S}, "scorers": [*SCORERS, BINDING]}
    for item in args.set:
        path, _, value = item.partition("=")
        section, _, key = path.partition(".")
        if not key:
            ap.error(f"--set {item!r}: expected SECTION.KEY=VALUE")
        config.setdefault(section, {})[key] = yaml.safe_load(value)
    print(
        f"{args.seconds:g} s of load per feed, {args.clients} clients; scorers {', '.join(s['id'] for s in SCORERS)}; "
        f"assembly.idle_s {config['assembly'].get('idle_s')}",
        flush=True,
    )
    summary = {}
    for mix in args.mix or [0.9, 0.0]:
        w = walk(mix, args.seconds, args.clients)
        t = tracescorer(mix, args.seconds, args.clients, config)
        summary[f"mix {mix:g}"] = {"walk": w, "tracescorer": t}
        print("\n".join(report(mix, w, t)), flush=True)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
