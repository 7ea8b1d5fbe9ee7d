"""Run-extraction micro-benchmark: µs of ``extract_runs`` per span, one trace per call.

Two workloads:

- ``load``: the reference load's agent-shaped traces (4 spans: ``invoke_agent`` > ``chat``,
  ``execute_tool``, ``chat``; GenAI attributes with 1–2 KB message JSON), built like
  ``bench/reference/otlp_load.py``'s ``build_templates()`` (the reference load generator), decoded
  with tracescorer's own OTLP decoder;
- each capture in ``tests/data/captures`` (every convention and framework we read), per case.

    .venv/bin/python bench/extraction.py [--seconds 3] [--traces 200] [--no-cases]

Prints one line per workload: traces, spans, µs/span (median of ``--reps`` timed passes) and the
best pass (on a shared machine the best is the steadier figure for before/after comparisons).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench" / "reference"))
from otlp_load import build_templates  # noqa: E402

from tracescorer.conventions import extract_runs  # noqa: E402
from tracescorer.model import LogRecord, Span  # noqa: E402
from tracescorer.receiver.decode import (  # noqa: E402
    decode_logs_json,
    decode_logs_protobuf,
    decode_traces_json,
    decode_traces_protobuf,
)

CAPTURES = ROOT / "tests" / "data" / "captures"

Trace = tuple[list[Span], list[LogRecord]]


def by_trace(spans: list[Span], logs: list[LogRecord]) -> list[Trace]:
    out: dict[str, Trace] = {}
    for s in spans:
        out.setdefault(s.trace_id, ([], []))[0].append(s)
    for r in logs:
        if r.trace_id in out:
            out[r.trace_id][1].append(r)
    return list(out.values())


def load_traces(n_traces: int) -> list[Trace]:
    spans: list[Span] = []
    for template in build_templates(max(1, -(-n_traces // 50)), 200):
        spans.extend(decode_traces_protobuf(template.data).spans)
    return by_trace(spans[: 4 * n_traces], [])


def capture_traces() -> dict[str, list[Trace]]:
    out = {}
    for case in sorted(p for p in CAPTURES.iterdir() if (p / "expected.json").is_file()):
        spans = [
            s
            for f in sorted((case / "requests").glob("*"))
            for s in (decode_traces_json if f.suffix == ".json" else decode_traces_protobuf)(f.read_bytes()).spans
        ]
        logs = (
            [
                r
                for f in sorted((case / "logs").glob("*"))
                for r in (decode_logs_json if f.suffix == ".json" else decode_logs_protobuf)(f.read_bytes()).records
            ]
            if (case / "logs").is_dir()
            else []
        )
        out[case.name] = by_trace(spans, logs)
    return out


def time_per_span(traces: list[Trace], seconds: float, reps: int) -> tuple[float, float]:
    """(median, best) over ``reps`` passes of CPU µs per span (process time: steadier on a shared
    machine than wall time); each pass loops for ``seconds / reps`` of CPU."""
    n_spans = sum(len(s) for s, _ in traces)
    results = []
    for _ in range(reps):
        done = 0
        started = time.process_time()
        deadline = started + seconds / reps
        while True:
            for spans, logs in traces:
                extract_runs(spans, logs)
            done += 1
            now = time.process_time()
            if now >= deadline:
                break
        results.append((now - started) / (done * n_spans) * 1e6)
    return statistics.median(results), min(results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0, help="timed seconds per workload")
    ap.add_argument("--reps", type=int, default=5, help="timed passes per workload (median, best)")
    ap.add_argument("--traces", type=int, default=200, help="reference-load traces")
    ap.add_argument("--no-cases", action="store_true", help="skip the per-capture figures")
    args = ap.parse_args()

    load = load_traces(args.traces)
    for spans, logs in load[:20]:  # warm-up, and a check that the load gives runs
        assert extract_runs(spans, logs).runs
    print(f"{'workload':44} {'traces':>6} {'spans':>6} {'µs/span':>8} {'best':>6}")
    us, best = time_per_span(load, args.seconds, args.reps)
    print(f"{'reference load (4-span GenAI traces)':44} {len(load):6} {4 * len(load):6} {us:8.1f} {best:6.1f}")
    if args.no_cases:
        return
    for name, traces in capture_traces().items():
        n_spans = sum(len(s) for s, _ in traces)
        us, best = time_per_span(traces, min(args.seconds, 1.0), args.reps)
        print(f"{name:44} {len(traces):6} {n_spans:6} {us:8.1f} {best:6.1f}")


if __name__ == "__main__":
    main()
