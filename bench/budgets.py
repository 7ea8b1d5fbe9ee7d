"""Per-stage budgets (issue 36): the CPU each stage spends per unit, as a ratio to the walk baseline.

The yardstick is ``bench/reference/parse_bench.py``'s ``walk`` (upb parse of an
ExportTraceServiceRequest + every span into a dict), timed in this process on the requests the
stages get: the reference load generator's agent payload (``otlp_load.py``'s ``build_templates()``,
``--mix 0``: 50 traces x 4 spans per request); walk µs per span = CPU of walking them / their
spans, measured again just before each stage (a shared machine's load changes). The stages:

- ``decode`` (≤ 0.7x walk per agent span): what the feed's decoding thread runs per record
  (``tracescorer.feed.batch.decode_batch``): triage of the request's bytes with every convention's
  markers, tracescorer's protobuf decode (``decode_traces_protobuf``) of what it kept (here: all
  of it), the evaluation prefilter; with ``--workers`` (default: the daemon's ``workers.count``
  on this machine) each worker's feed does so for its share of the traces, summed;
- ``extract`` (≤ 1.3x per span): ``extract_runs``, one trace per call, as assembly calls it;
- ``score`` (≤ 0.5x per score): the two code scorers ``bench/sustained.py`` binds, through a
  ``ScoringRunner`` as the daemon builds it: decide, the code workers' queue, the scorer, the
  score and decision records, the writer handing them to a store that keeps nothing;
- ``write`` (≤ 1x per span): the rows those traces leave (runs with their assembly records, as
  assembly writes them: ``CHUNK`` traces per write; then scores with their decisions) into a
  DuckDB store in a temp dir, built as the daemon builds it (``build_stores``): the CPU of this
  process and of the store process, apart and summed. Each pass writes new ids.

CPU is process time, the median of ``--reps`` passes of ``--seconds / --reps`` each; a stage's
parts are printed under it. Ratios are what travel between machines.

    .venv/bin/python bench/budgets.py [--seconds 3] [--reps 3] [--requests 16] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "reference"))
from extraction import by_trace  # noqa: E402
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: E402
from otlp_load import build_templates  # noqa: E402
from parse_bench import walk  # noqa: E402
from sustained import SCORERS, SPANS_PER_REQUEST  # noqa: E402

from tracescorer.assembly.stage import CHUNK  # noqa: E402
from tracescorer.calibration.intake import EvaluationIntake  # noqa: E402
from tracescorer.config import Settings  # noqa: E402
from tracescorer.conventions import extract_runs  # noqa: E402
from tracescorer.conventions.registry import markers  # noqa: E402
from tracescorer.feed.batch import decode_batch  # noqa: E402
from tracescorer.feed.partition import Partition  # noqa: E402
from tracescorer.feed.triage import Owns, Triage  # noqa: E402
from tracescorer.lifecycle import Stages  # noqa: E402
from tracescorer.metrics import Metrics  # noqa: E402
from tracescorer.model import AgentRun, Span  # noqa: E402
from tracescorer.receiver.decode import decode_traces_protobuf  # noqa: E402
from tracescorer.records.scores import AssemblyRecord, DecisionRecord, ScoreRecord  # noqa: E402
from tracescorer.runner.bindings import build_bindings  # noqa: E402
from tracescorer.runner.decider import Decision  # noqa: E402
from tracescorer.runner.records import decision_record, score_record  # noqa: E402
from tracescorer.runner.stage import ScoringRunner  # noqa: E402
from tracescorer.runner.targets import run_target  # noqa: E402
from tracescorer.seglog import TRACES, Record  # noqa: E402
from tracescorer.store.factory import build_stores  # noqa: E402

BUDGETS = {"decode": 0.7, "extract": 1.3, "score": 0.5, "write": 1.0}
UNITS = {"decode": "agent span", "extract": "span", "score": "score", "write": "span"}


async def per_unit(one_pass: Callable[[], object], units: int, seconds: float, reps: int) -> float:
    """Median over ``reps`` of CPU µs per unit; each rep repeats ``one_pass`` (a function or a
    coroutine function) for ``seconds / reps``, after one pass untimed."""

    async def run() -> None:
        done = one_pass()
        if inspect.isawaitable(done):
            await done

    await run()
    results = []
    for _ in range(reps):
        done, started = 0, time.process_time()
        while True:
            await run()
            done += 1
            now = time.process_time()
            if now - started >= seconds / reps:
                break
        results.append((now - started) / (done * units) * 1e6)
    return statistics.median(results)


# --- the walk baseline, decode and extraction ------------------------------------------------------


async def walk_us(payloads: Sequence[bytes], seconds: float, reps: int) -> float:
    def one_pass() -> None:
        for p in payloads:
            req = trace_service_pb2.ExportTraceServiceRequest()
            req.ParseFromString(p)
            walk(req)

    return await per_unit(one_pass, SPANS_PER_REQUEST * len(payloads), seconds, reps)


def owner(owns: Owns | None) -> Callable[[int], Owns | None] | None:
    """A worker's feed: every record's share is the worker's (None: one process takes all)."""
    return None if owns is None else lambda _offset: owns


async def decode_us(payloads: Sequence[bytes], workers: int, seconds: float, reps: int) -> dict[str, float]:
    """The decoding threads' work per agent span (with ``workers``, each worker's feed decodes its
    share of the traces: summed), and its parts."""
    prefilter = EvaluationIntake(None, Metrics())  # type: ignore[arg-type]  # take() never stores
    records, at = [], 0  # offsets as in the segment log: one record after the other
    for p in payloads:
        records.append(Record(offset=at, kind=TRACES, payload=p))
        at = records[-1].end
    shares: list[Owns | None] = [Partition(i, workers).owns for i in range(workers)] or [None]
    feeds = [(Triage(markers()), share) for share in shares]

    def one_pass(feeds: Sequence[tuple[Triage, Owns | None]]) -> int:  # the spans decoded
        return sum(len(decode_batch(records, t, lambda _at: None, prefilter, owner(o)).spans) for t, o in feeds)

    spans = one_pass(feeds)
    assert spans == SPANS_PER_REQUEST * len(payloads), "triage left agent spans out"
    decoded = [decode_traces_protobuf(p).spans for p in payloads]
    triage, third = feeds[0][0], seconds / 3
    out = {
        "us": await per_unit(lambda: one_pass(feeds), spans, seconds, reps),
        "triage": await per_unit(lambda: [triage.sort(r.payload, r.offset) for r in records], spans, third, reps),
        "decode_traces_protobuf": await per_unit(
            lambda: [decode_traces_protobuf(p) for p in payloads], spans, third, reps
        ),
        "prefilter": await per_unit(lambda: [prefilter.take(s, ()) for s in decoded], spans, third, reps),
    }
    if workers:
        out["in one process (workers.count 0)"] = await per_unit(lambda: one_pass([(triage, None)]), spans, third, reps)
    return out


async def extract_us(traces: Sequence[list[Span]], seconds: float, reps: int) -> dict[str, float]:
    keys = Settings().assembly.conversation_keys

    def one_pass() -> None:
        for spans in traces:
            extract_runs(spans, (), conversation_keys=keys)

    return {"us": await per_unit(one_pass, sum(map(len, traces)), seconds, reps)}


# --- scoring ----------------------------------------------------------------------------------------


class LastPass:
    """A score store that keeps the rows of the last pass only (they are what ``write`` stores)."""

    def __init__(self) -> None:
        self.scores: list[ScoreRecord] = []
        self.decisions: list[DecisionRecord] = []

    def clear(self) -> None:
        self.scores, self.decisions = [], []

    async def write_scores(self, scores: Sequence[ScoreRecord], decisions: Sequence[DecisionRecord]) -> None:
        self.scores += scores
        self.decisions += decisions

    async def spent_today_usd(self) -> float:
        return 0.0


async def score_us(
    settings: Settings, runs: Sequence[AgentRun], seconds: float, reps: int
) -> tuple[dict[str, float], LastPass]:
    """Per score through a runner (decide → code workers → scorer → records → writer), and parts."""
    store = LastPass()
    bound = build_bindings(settings.scorers, settings.judge)
    assert bound and not any(b.uses_judge for b in bound)
    runner = ScoringRunner(bound, store, store, Metrics(), settings)  # type: ignore[arg-type]
    await runner.start_workers()
    n = len(runs) * len(bound)

    async def one_pass() -> None:
        store.clear()
        decided = []
        for run in runs:  # as ScoringRunner.on_runs does, keeping the futures to wait on
            target = run_target(run)
            decided += [runner.decide(b, target, "live") for b in bound]
        results = await asyncio.gather(*(d for d in decided if isinstance(d, asyncio.Future)))
        await runner.flush()
        assert len(results) == n and all(r is Decision.SCORED for r in results), set(results)

    out = {"us": await per_unit(one_pass, n, seconds, reps)}
    assert len(store.scores) == n and len(store.decisions) == n
    targets = [run_target(r) for r in runs]
    results = {b.binding.id: await b.scorer.run(targets[0].subject) for b in bound}  # for the records

    async def scorers_only() -> None:
        for target in targets:
            for b in bound:
                await b.scorer.run(target.subject)

    def records_only() -> None:
        for target in targets:
            for b in bound:
                score = score_record(b, target, "live", results[b.binding.id], None, 0.001)
                decision_record(b, target, Decision.SCORED, None, "live", score.id)

    out["scorer.run"] = await per_unit(scorers_only, n, seconds / 3, reps)
    out["score + decision records"] = await per_unit(records_only, n, seconds / 3, reps)
    await runner.stop(time.monotonic() + 5)
    return out, store


# --- writes -----------------------------------------------------------------------------------------


def pass_rows(k: int, runs: Sequence[AgentRun], rows: LastPass, spans_per_trace: int) -> list[Any]:
    """The writes of pass ``k``, ``CHUNK`` runs each (their runs and assembly records, then their
    scores and decisions), every id made new: the first 8 hex digits of trace ids, a suffix on others."""

    def fresh(row: Any, *fields: str) -> Any:
        return replace(row, trace_id=f"{k:08x}{row.trace_id[8:]}", **{f: f"{getattr(row, f)}-{k}" for f in fields})

    scores_of: dict[str, list[ScoreRecord]] = {}
    for s in rows.scores:
        scores_of.setdefault(s.run_id or "", []).append(s)
    decision_of = {d.score_id: d for d in rows.decisions}
    out: list[Any] = []
    now = time.time()
    for at in range(0, len(runs), CHUNK):
        chunk = runs[at : at + CHUNK]
        new = [fresh(r, "run_id") for r in chunk]
        records = [
            AssemblyRecord(
                trace_id=r.trace_id,
                reason="idle",
                incomplete=False,
                span_count=spans_per_trace,
                log_count=0,
                run_count=1,
                unmatched_reason=None,
                service_name=r.service_name,
                root_name=f"invoke_agent {r.agent_name}",
                last_received_at=now,
            )
            for r in new
        ]
        scores = [s for r in chunk for s in scores_of[r.run_id]]
        decisions = [decision_of[s.id] for s in scores]
        out.append((new, records, [r.trace_id for r in new]))
        out.append(
            ([fresh(s, "id", "run_id") for s in scores], [fresh(d, "id", "target_id", "score_id") for d in decisions])
        )
    return out


async def write_us(
    settings: Settings, runs: Sequence[AgentRun], rows: LastPass, spans_per_trace: int, seconds: float, reps: int
) -> dict[str, float]:
    """Per span: runs + assembly records (both sent together, as assembly does), then scores +
    decisions, into a real DuckDB store; this process's CPU and the store process's."""
    stores = build_stores(settings, Metrics(), owner="bench", maintenance=False)
    stages = Stages(lambda: time.monotonic() + 30)
    for component in stores.components:
        await stages.enter(component)
    server = next(c for c in psutil.Process().children() if "tracescorer.store.duckdb.server" in " ".join(c.cmdline()))

    def cpu() -> tuple[float, float]:
        t = server.cpu_times()
        return time.process_time(), t.user + t.system

    parts, spans = ("runs + assembly", "scores + decisions"), len(runs) * spans_per_trace
    per_rep: list[list[float]] = []  # µs per span: the parts here, in the store, the store between writes
    k = 0
    try:
        for _ in range(reps):
            spent, passes, rep_started = [0.0] * 5, 0, cpu()
            while sum(spent) < seconds / reps or not passes:
                k += 1
                for i, write in enumerate(pass_rows(k, runs, rows, spans_per_trace)):
                    before = cpu()
                    if i % 2 == 0:
                        new, records, ids = write
                        await asyncio.gather(
                            stores.runs.upsert_runs(new, new_traces=ids),
                            stores.span_log.record_assembly(records, new_traces=ids),
                        )
                    else:
                        await stores.scores.write_scores(*write)
                    after = cpu()
                    spent[i % 2] += after[0] - before[0]
                    spent[2 + i % 2] += after[1] - before[1]
                passes += 1
            spent[4] = cpu()[1] - rep_started[1] - spent[2] - spent[3]  # e.g. checkpoints
            per_rep.append([x / (passes * spans) * 1e6 for x in spent])
        count = await stores.queries.query("SELECT count(*) AS n FROM scores", max_rows=1, timeout_s=30)
        assert count.dicts()[0]["n"] == k * len(rows.scores), count.dicts()
    finally:
        await stages.aclose()
    med = [statistics.median(r[i] for r in per_rep) for i in range(5)]
    out = {
        f"{p}: {who}": med[2 * w + i]
        for w, who in enumerate(("this process", "store process"))
        for i, p in enumerate(parts)
    }
    out["store process: between writes"] = med[4]
    out["this process"], out["store process"] = med[0] + med[1], med[2] + med[3] + med[4]
    out["us"] = sum(med)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0, help="CPU seconds per stage (its parts: a third each)")
    ap.add_argument("--reps", type=int, default=3, help="timed passes per figure (median)")
    ap.add_argument("--requests", type=int, default=16, help="distinct requests of the agent payload")
    ap.add_argument("--workers", type=int, help="worker processes decoding (default: the daemon's workers.count here)")
    ap.add_argument("--json", type=Path, help="write every figure here")
    args = ap.parse_args()

    payloads = [t.data for t in build_templates(args.requests, SPANS_PER_REQUEST, mix=0.0)]
    traces = [spans for spans, _ in by_trace([s for p in payloads for s in decode_traces_protobuf(p).spans], [])]
    spans_per_trace = SPANS_PER_REQUEST * len(payloads) // len(traces)
    runs = [run for spans in traces for run in extract_runs(spans, ()).runs]
    assert len(runs) == len(traces), "every agent trace gives one run"
    stages: dict[str, dict[str, float]] = {}
    workers = Settings().workers.resolved() if args.workers is None else args.workers

    async def measure(tmp: str) -> None:
        settings = Settings.model_validate({"scorers": SCORERS, "store": {"path": str(Path(tmp) / "ts.duckdb")}})
        # each stage against a walk measured just before it (a shared machine's load changes meanwhile)
        for name in BUDGETS:
            walk = await walk_us(payloads, args.seconds / 2, args.reps)
            if name == "decode":
                stages[name] = await decode_us(payloads, workers, args.seconds, args.reps)
            elif name == "extract":
                stages[name] = await extract_us(traces, args.seconds, args.reps)
            elif name == "score":
                stages[name], rows = await score_us(settings, runs, args.seconds, args.reps)
            else:
                stages[name] = await write_us(settings, runs, rows, spans_per_trace, args.seconds, args.reps)
            stages[name]["walk"] = walk

    with tempfile.TemporaryDirectory(prefix="ts-budgets-") as tmp:
        asyncio.run(measure(tmp))
    load = os.getloadavg()[0]

    print(
        f"agent payload: {len(payloads)} requests x {SPANS_PER_REQUEST} spans ({len(traces)} traces, "
        f"{len(runs)} runs), {workers} workers; load average {load:.1f}"
    )
    print(f"{'stage':10} {'µs/unit':>8} {'unit':11} {'walk µs/span':>12} {'ratio':>6} {'budget':>6}")
    report: dict[str, Any] = {
        "requests": len(payloads),
        "spans_per_request": SPANS_PER_REQUEST,
        "traces": len(traces),
        "workers": workers,
        "load_average_1m": round(load, 2),
        "stages": {},
    }
    for name, figures in stages.items():
        base = figures.pop("walk")
        ratio = figures["us"] / base
        ok = ratio <= BUDGETS[name]
        print(
            f"{name:10} {figures['us']:8.2f} {UNITS[name]:11} {base:12.2f} {ratio:6.2f} {BUDGETS[name]:5.1f}x "
            f"{'ok' if ok else 'MISS'}"
        )
        for part, us in figures.items():
            if part != "us":
                print(f"  {part:36} {us:8.2f} µs  {us / base:5.2f}x")
        report["stages"][name] = {
            "unit": UNITS[name],
            "us_per_unit": round(figures["us"], 3),
            "walk_us_per_span": round(base, 3),
            "ratio": round(ratio, 3),
            "budget": BUDGETS[name],
            "ok": ok,
            "parts_us": {k: round(v, 3) for k, v in figures.items() if k != "us"},
        }
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
