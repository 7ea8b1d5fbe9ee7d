"""Assembly + extraction benchmark: runs/s rebuilt in-process and RSS per buffered trace.

Traces are the captured samples in tests/data/captures (every convention we read), re-issued
under fresh trace ids, so the shapes and attribute sizes are those real frameworks send.

    .venv/bin/python bench/assembly.py [--seconds 10] [--buffered 5000]

Prints:
- extraction: traces/s and runs/s through ``extract_runs`` (one trace per call, as the daemon
  does after assembly), per convention and overall;
- pipeline: spans/s and runs/s through ``TraceBuffer`` (add, complete, pop) + extraction;
- memory: RSS growth per buffered trace (and per buffered span) with ``--buffered`` traces held.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchutil import rss_bytes  # noqa: E402 - bench/ is the script's own folder

from tracescorer.assembly import TraceBuffer  # noqa: E402
from tracescorer.conventions import extract_runs  # noqa: E402
from tracescorer.model import LogRecord, Span  # noqa: E402
from tracescorer.receiver.decode import decode_logs_protobuf, decode_traces_protobuf  # noqa: E402

CAPTURES = ROOT / "tests" / "data" / "captures"


def load_traces() -> list[tuple[str, list[Span], list[LogRecord]]]:
    """(case, spans, logs) per trace of every capture."""
    out = []
    for case in sorted(CAPTURES.iterdir()):
        spans = [
            s for f in sorted((case / "requests").glob("*.pb")) for s in decode_traces_protobuf(f.read_bytes()).spans
        ]
        logs = (
            [r for f in sorted((case / "logs").glob("*.pb")) for r in decode_logs_protobuf(f.read_bytes()).records]
            if (case / "logs").is_dir()
            else []
        )
        for tid in dict.fromkeys(s.trace_id for s in spans):
            out.append((case.name, [s for s in spans if s.trace_id == tid], [r for r in logs if r.trace_id == tid]))
    return out


def reissue(spans: list[Span], logs: list[LogRecord], n: int) -> tuple[list[Span], list[LogRecord]]:
    tid = f"{n:032x}"
    return ([dataclasses.replace(s, trace_id=tid) for s in spans], [dataclasses.replace(r, trace_id=tid) for r in logs])


def own_rss() -> int:
    return rss_bytes(os.getpid())


def bench_extraction(traces: list[tuple[str, list[Span], list[LogRecord]]], seconds: float) -> None:
    per_case: dict[str, tuple[int, int, float]] = {}
    budget = seconds / len(traces)
    total_traces = total_runs = 0
    total_time = 0.0
    for case, spans, logs in traces:
        n = runs = 0
        start = time.perf_counter()
        while time.perf_counter() - start < budget:
            runs += len(extract_runs(spans, logs).runs)
            n += 1
        elapsed = time.perf_counter() - start
        t, r, e = per_case.get(case, (0, 0, 0.0))
        per_case[case] = (t + n, r + runs, e + elapsed)
        total_traces += n
        total_runs += runs
        total_time += elapsed
    print("extraction (extract_runs, one trace per call):")
    for case, (t, r, e) in per_case.items():
        print(f"  {case:42s} {t / e:9.0f} traces/s {r / e:9.0f} runs/s")
    print(f"  {'overall':42s} {total_traces / total_time:9.0f} traces/s {total_runs / total_time:9.0f} runs/s")


def bench_pipeline(traces: list[tuple[str, list[Span], list[LogRecord]]], seconds: float) -> None:
    now = [0.0]
    buf = TraceBuffer(idle_s=5, max_wait_s=300, clock=lambda: now[0])
    n = spans_in = runs = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        _case, spans, logs = traces[n % len(traces)]
        s2, l2 = reissue(spans, logs, n)
        buf.add_spans(s2)
        buf.add_logs(l2)
        spans_in += len(s2)
        n += 1
        now[0] += 0.01
        if n % 100 == 0:
            for t in buf.pop_complete():
                runs += len(extract_runs(t.spans, t.logs, incomplete=t.incomplete).runs)
    now[0] += 10
    for t in buf.pop_complete():
        runs += len(extract_runs(t.spans, t.logs, incomplete=t.incomplete).runs)
    elapsed = time.perf_counter() - start
    print("pipeline (TraceBuffer add/complete/pop + extract_runs):")
    print(
        f"  {n / elapsed:9.0f} traces/s {spans_in / elapsed:9.0f} spans/s {runs / elapsed:9.0f} runs/s"
        f"  ({n} traces, {runs} runs, {elapsed:.1f} s)"
    )


def bench_memory(traces: list[tuple[str, list[Span], list[LogRecord]]], buffered: int) -> None:
    # Decode fresh copies so the buffered spans own their attribute data, like live traffic.
    raw = []
    for case in sorted(CAPTURES.iterdir()):
        raw.extend(f.read_bytes() for f in sorted((case / "requests").glob("*.pb")))
    buf = TraceBuffer(max_traces=buffered * 2, max_spans=buffered * 100)
    gc.collect()
    before = own_rss()
    n = spans = 0
    while len(buf) < buffered:
        for body in raw:
            decoded = decode_traces_protobuf(body).spans
            suffix = f"{n:08x}"
            batch = [dataclasses.replace(s, trace_id=s.trace_id[:24] + suffix) for s in decoded]
            buf.add_spans(batch)
            spans += len(batch)
            n += 1
            if len(buf) >= buffered:
                break
    gc.collect()
    grown = own_rss() - before
    print("memory (RSS growth while buffering decoded capture traces):")
    print(
        f"  {len(buf)} traces / {buf.stats.items_buffered} spans buffered: +{grown / 2**20:.1f} MiB, "
        f"{grown / len(buf) / 1024:.1f} KiB per trace, {grown / buf.stats.items_buffered / 1024:.2f} KiB per span"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="time for each throughput phase")
    ap.add_argument("--buffered", type=int, default=5000, help="traces held for the memory figure")
    args = ap.parse_args()
    traces = load_traces()
    print(f"{len(traces)} distinct traces from {CAPTURES.relative_to(ROOT)}")
    bench_extraction(traces, args.seconds)
    bench_pipeline(traces, args.seconds)
    bench_memory(traces, args.buffered)


if __name__ == "__main__":
    main()
