"""Run-extraction micro-benchmark: µs of ``extract_runs`` per span, one trace per call.

Two workloads:

- ``load``: the reference load's agent-shaped traces (4 spans: ``invoke_agent`` > ``chat``,
  ``execute_tool``, ``chat``; GenAI attributes with 1–2 KB message JSON), built like
  ``shared/bench/otlp_load.py``'s ``build_templates()`` (copied here: the repo must not depend on
  it) and decoded with tracescorer's own OTLP decoder;
- each capture in ``tests/data/captures`` (every convention and framework we read), per case.

    .venv/bin/python bench/extraction.py [--seconds 3] [--traces 200] [--cases]

Prints one line per workload: traces, spans, µs/span (median of ``--reps`` timed passes).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as ts_pb2  # noqa: E402
from opentelemetry.proto.common.v1 import common_pb2  # noqa: E402
from opentelemetry.proto.resource.v1 import resource_pb2  # noqa: E402
from opentelemetry.proto.trace.v1 import trace_pb2  # noqa: E402

from tracescorer.conventions import extract_runs  # noqa: E402
from tracescorer.model import LogRecord, Span  # noqa: E402
from tracescorer.receiver.decode import (  # noqa: E402
    decode_logs_json,
    decode_logs_protobuf,
    decode_traces_json,
    decode_traces_protobuf,
)

CAPTURES = ROOT / "tests" / "data" / "captures"

# --- the reference load's traces (after shared/bench/otlp_load.py) ------------------------------

_WORDS = (
    "agent tool weather forecast city temperature booking flight hotel user "
    "assistant please could you find the best option for tomorrow price budget "
    "search result summary analysis report data customer order refund policy "
    "account invoice shipping status delayed ticket support escalate resolve "
    "calendar meeting schedule reminder email draft reply translate document "
    "code review bug fix test deploy pipeline latency error retry timeout"
).split()


def _text(rng: random.Random, nbytes: int) -> str:
    out, n = [], 0
    while n < nbytes:
        w = rng.choice(_WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)


def _messages(rng: random.Random, roles: list[str], target_bytes: int) -> str:
    per = max(40, target_bytes // len(roles) - 60)
    msgs = [{"role": r, "parts": [{"type": "text", "content": _text(rng, per)}]} for r in roles]
    return json.dumps(msgs, separators=(",", ":"))


def _kv(key: str, value: object) -> common_pb2.KeyValue:
    kv = common_pb2.KeyValue(key=key)
    if isinstance(value, bool):
        kv.value.bool_value = value
    elif isinstance(value, int):
        kv.value.int_value = value
    elif isinstance(value, float):
        kv.value.double_value = value
    elif isinstance(value, (list, tuple)):
        kv.value.array_value.values.extend(common_pb2.AnyValue(string_value=str(v)) for v in value)
    else:
        kv.value.string_value = str(value)
    return kv


def build_request(seed: int, n_traces: int) -> bytes:
    """One ExportTraceServiceRequest of ``n_traces`` 4-span agent traces."""
    rng = random.Random(seed)
    req = ts_pb2.ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.CopyFrom(resource_pb2.Resource(attributes=[
        _kv("service.name", f"agent-svc-{seed % 7}"), _kv("service.version", "1.4.2"),
        _kv("deployment.environment.name", "prod"), _kv("telemetry.sdk.name", "opentelemetry"),
        _kv("telemetry.sdk.language", "python"), _kv("telemetry.sdk.version", "1.38.0"),
    ]))
    ss = rs.scope_spans.add()
    ss.scope.name = "opentelemetry.instrumentation.openai_agents"
    ss.scope.version = "0.2.0"
    t0 = 1_760_000_000_000_000_000 + seed * 10_000_000_000
    agents = ["travel-planner", "support-triage", "code-reviewer", "research-assistant"]
    tools = ["get_weather", "search_flights", "lookup_order", "run_tests", "web_search"]
    models = ["gpt-4o-2024-08-06", "claude-sonnet-4", "gpt-4.1-mini"]
    for t in range(n_traces):
        tid = rng.randbytes(16)
        agent, tool, model = rng.choice(agents), rng.choice(tools), rng.choice(models)
        conv = f"conv_{rng.getrandbits(64):016x}"
        start = t0 + t * 50_000_000
        root_id, c1, tl, c2 = (rng.randbytes(8) for _ in range(4))
        common = [_kv("gen_ai.agent.name", agent), _kv("gen_ai.conversation.id", conv),
                  _kv("gen_ai.provider.name", "openai")]

        def span(name: str, sid: bytes, parent: bytes | None, kind: int, s: int, e: int,
                 attrs: list[common_pb2.KeyValue]) -> None:
            sp = ss.spans.add()
            sp.trace_id, sp.span_id = tid, sid
            if parent:
                sp.parent_span_id = parent
            sp.name, sp.kind = name, kind
            sp.start_time_unix_nano, sp.end_time_unix_nano = s, e
            sp.status.code = trace_pb2.Status.STATUS_CODE_OK
            sp.attributes.extend(attrs)

        dur = [rng.randint(300, 2500) * 1_000_000 for _ in range(3)]
        s1 = start + 1_000_000
        s2 = s1 + dur[0] + 500_000
        s3 = s2 + dur[1] + 500_000
        end = s3 + dur[2] + 1_000_000
        span(f"chat {model}", c1, root_id, trace_pb2.Span.SPAN_KIND_CLIENT, s1, s1 + dur[0], common + [
            _kv("gen_ai.operation.name", "chat"),
            _kv("gen_ai.request.model", model), _kv("gen_ai.response.model", model),
            _kv("gen_ai.response.id", f"chatcmpl-{rng.getrandbits(64):x}"),
            _kv("gen_ai.response.finish_reasons", ["tool_calls"]),
            _kv("gen_ai.request.temperature", 0.2), _kv("gen_ai.request.max_tokens", 1024),
            _kv("gen_ai.usage.input_tokens", rng.randint(300, 900)),
            _kv("gen_ai.usage.output_tokens", rng.randint(20, 80)),
            _kv("server.address", "api.openai.com"), _kv("server.port", 443),
            _kv("gen_ai.input.messages", _messages(rng, ["system", "user"], rng.randint(1000, 2000))),
            _kv("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [
                {"type": "tool_call", "id": f"call_{rng.getrandbits(48):x}", "name": tool,
                 "arguments": {"query": _text(rng, 80)}}], "finish_reason": "tool_calls"}],
                separators=(",", ":"))),
        ])
        span(f"execute_tool {tool}", tl, root_id, trace_pb2.Span.SPAN_KIND_INTERNAL, s2, s2 + dur[1], common + [
            _kv("gen_ai.operation.name", "execute_tool"),
            _kv("gen_ai.tool.name", tool), _kv("gen_ai.tool.type", "function"),
            _kv("gen_ai.tool.call.id", f"call_{rng.getrandbits(48):x}"),
            _kv("gen_ai.tool.call.arguments", json.dumps({"query": _text(rng, 80)})),
            _kv("gen_ai.tool.call.result", json.dumps({"result": _text(rng, rng.randint(300, 700))})),
        ])
        span(f"chat {model}", c2, root_id, trace_pb2.Span.SPAN_KIND_CLIENT, s3, s3 + dur[2], common + [
            _kv("gen_ai.operation.name", "chat"),
            _kv("gen_ai.request.model", model), _kv("gen_ai.response.model", model),
            _kv("gen_ai.response.id", f"chatcmpl-{rng.getrandbits(64):x}"),
            _kv("gen_ai.response.finish_reasons", ["stop"]),
            _kv("gen_ai.request.temperature", 0.2), _kv("gen_ai.request.max_tokens", 1024),
            _kv("gen_ai.usage.input_tokens", rng.randint(600, 1500)),
            _kv("gen_ai.usage.output_tokens", rng.randint(100, 400)),
            _kv("server.address", "api.openai.com"), _kv("server.port", 443),
            _kv("gen_ai.input.messages",
                _messages(rng, ["system", "user", "assistant", "tool"], rng.randint(1500, 2000))),
            _kv("gen_ai.output.messages", _messages(rng, ["assistant"], rng.randint(600, 1200))),
        ])
        span(f"invoke_agent {agent}", root_id, None, trace_pb2.Span.SPAN_KIND_INTERNAL, start, end, common + [
            _kv("gen_ai.operation.name", "invoke_agent"),
            _kv("gen_ai.agent.id", f"asst_{rng.getrandbits(40):x}"),
            _kv("gen_ai.agent.description", "Helps users with " + _text(rng, 40)),
            _kv("gen_ai.request.model", model),
            _kv("gen_ai.usage.input_tokens", rng.randint(900, 2400)),
            _kv("gen_ai.usage.output_tokens", rng.randint(120, 480)),
            _kv("gen_ai.input.messages", _messages(rng, ["user"], rng.randint(1000, 1500))),
            _kv("gen_ai.output.messages", _messages(rng, ["assistant"], rng.randint(600, 1200))),
        ])
    return req.SerializeToString()


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
    seed = 1
    while len(spans) < 4 * n_traces:
        spans.extend(decode_traces_protobuf(build_request(seed, 50)).spans)
        seed += 1
    return by_trace(spans[: 4 * n_traces], [])


def capture_traces() -> dict[str, list[Trace]]:
    out = {}
    for case in sorted(p for p in CAPTURES.iterdir() if (p / "expected.json").is_file()):
        spans = [s for f in sorted((case / "requests").glob("*"))
                 for s in (decode_traces_json if f.suffix == ".json" else decode_traces_protobuf)(
                     f.read_bytes()).spans]
        logs = [r for f in sorted((case / "logs").glob("*"))
                for r in (decode_logs_json if f.suffix == ".json" else decode_logs_protobuf)(
                    f.read_bytes()).records] if (case / "logs").is_dir() else []
        out[case.name] = by_trace(spans, logs)
    return out


def time_per_span(traces: list[Trace], seconds: float, reps: int) -> float:
    """Median over ``reps`` passes of CPU µs per span (process time: steadier on a shared
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
    return statistics.median(results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0, help="timed seconds per workload")
    ap.add_argument("--reps", type=int, default=3, help="timed passes per workload (median)")
    ap.add_argument("--traces", type=int, default=200, help="reference-load traces")
    ap.add_argument("--no-cases", action="store_true", help="skip the per-capture figures")
    args = ap.parse_args()

    load = load_traces(args.traces)
    for spans, logs in load[:20]:  # warm-up, and a check that the load gives runs
        assert extract_runs(spans, logs).runs
    print(f"{'workload':44} {'traces':>6} {'spans':>6} {'µs/span':>8}")
    us = time_per_span(load, args.seconds, args.reps)
    print(f"{'reference load (4-span GenAI traces)':44} {len(load):6} {4 * len(load):6} {us:8.1f}")
    if args.no_cases:
        return
    for name, traces in capture_traces().items():
        n_spans = sum(len(s) for s, _ in traces)
        us = time_per_span(traces, min(args.seconds, 1.0), args.reps)
        print(f"{name:44} {len(traces):6} {n_spans:6} {us:8.1f}")


if __name__ == "__main__":
    main()
