"""Ingest throughput: tracescorer's receivers (durable commit) vs a parse-only baseline server.

Agent-shaped traces (invoke_agent > chat, execute_tool, chat; 1-2 KB GenAI message JSON),
200 spans per request, several concurrent clients, over gRPC and OTLP/HTTP protobuf. The baseline
is a minimal server in the same run that parses each request and walks every attribute, then
answers; tracescorer additionally converts, commits to DuckDB and only then answers. Prints
spans/s, request latency p50/p99, server RSS and the ratio to the baseline. Bounded in time.

    python bench/ingest.py [--seconds 8] [--clients 8]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing as mp
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
import yaml
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from benchutil import rss_bytes  # noqa: E402 - bench/ is the script's own folder

REPO = Path(__file__).resolve().parents[1]
METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
SPANS_PER_REQUEST = 200


# --- payloads -----------------------------------------------------------------------------------

def _kv(key: str, value: object) -> KeyValue:
    v = AnyValue()
    if isinstance(value, str):
        v.string_value = value
    elif isinstance(value, int):
        v.int_value = value
    return KeyValue(key=key, value=v)


def make_payloads(count: int, seed: int = 7) -> list[bytes]:
    rnd = random.Random(seed)
    words = "weather paris london umbrella forecast sunny rain travel hotel booking refund order".split()
    out = []
    for _ in range(count):
        req = ExportTraceServiceRequest()
        rs = req.resource_spans.add()
        rs.resource.attributes.append(_kv("service.name", "bench-agent"))
        ss = rs.scope_spans.add()
        ss.scope.name = "bench"
        for _t in range(SPANS_PER_REQUEST // 4):
            trace_id = rnd.randbytes(16)
            root = rnd.randbytes(8)
            text = " ".join(rnd.choice(words) for _ in range(rnd.randint(150, 300)))
            inp = json.dumps([{"role": "user", "parts": [{"type": "text", "content": text[: len(text) // 2]}]}])
            outp = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": text[len(text) // 2 :]}]}])
            start = time.time_ns()
            specs = [
                (root, b"", "invoke_agent weather", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather",
                                                     "gen_ai.conversation.id": rnd.randbytes(6).hex(),
                                                     "gen_ai.input.messages": inp, "gen_ai.output.messages": outp}),
                (rnd.randbytes(8), root, "chat gpt-4o-mini", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                                                               "gen_ai.input.messages": inp, "gen_ai.usage.input_tokens": 420}),
                (rnd.randbytes(8), root, "execute_tool get_weather", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                                                                       "gen_ai.tool.call.arguments": '{"city": "Paris"}'}),
                (rnd.randbytes(8), root, "chat gpt-4o-mini", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": outp,
                                                               "gen_ai.usage.output_tokens": 57}),
            ]
            for span_id, parent, name, attrs in specs:
                s = ss.spans.add()
                s.trace_id, s.span_id, s.parent_span_id, s.name = trace_id, span_id, parent, name
                s.kind = 3 if name.startswith("chat") else 1
                s.start_time_unix_nano, s.end_time_unix_nano = start, start + 1_000_000
                s.attributes.extend(_kv(k, v) for k, v in attrs.items())
        out.append(req.SerializeToString())
    return out


# --- baseline: parse + walk every attribute, nothing else ------------------------------------------

def _walk(value: AnyValue) -> object:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_walk(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _walk(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def parse_and_walk(body: bytes) -> int:
    """Parse the request and read every span's ids, name, times and every attribute key/value."""
    req = ExportTraceServiceRequest.FromString(body)
    n = 0
    for rs in req.resource_spans:
        for kv in rs.resource.attributes:
            _walk(kv.value)
        for ss in rs.scope_spans:
            for s in ss.spans:
                _ = (s.trace_id, s.span_id, s.parent_span_id, s.name, s.start_time_unix_nano, s.end_time_unix_nano)
                for kv in s.attributes:
                    _walk(kv.value)
                    n += 1
    return n


def baseline_server(grpc_port: int, http_port: int) -> None:
    from aiohttp import web

    async def main() -> None:
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", 64 << 20)])

        async def export(request: bytes, context: object) -> bytes:
            parse_and_walk(request)
            return b""

        handler = grpc.unary_unary_rpc_method_handler(export, request_deserializer=None, response_serializer=None)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "opentelemetry.proto.collector.trace.v1.TraceService", {"Export": handler}),))
        server.add_insecure_port(f"127.0.0.1:{grpc_port}")
        await server.start()

        async def traces(request: web.Request) -> web.Response:
            parse_and_walk(await request.read())
            return web.Response(body=b"", content_type="application/x-protobuf")

        app = web.Application(client_max_size=64 << 20)
        app.add_routes([web.post("/v1/traces", traces)])
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", http_port).start()
        await asyncio.Event().wait()

    asyncio.run(main())


# --- load generator ---------------------------------------------------------------------------------

def _client_worker(transport: str, target: str, payloads: list[bytes], deadline: float, out: mp.Queue, threads: int) -> None:
    results: list[tuple[float, bool, int]] = []
    lock = threading.Lock()

    def run(offset: int) -> None:
        local = []
        i = offset
        if transport == "grpc":
            channel = grpc.insecure_channel(target, options=[("grpc.max_send_message_length", 64 << 20)])
            call = channel.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
        else:
            host, port = target.split(":")
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
        while time.monotonic() < deadline:
            body = payloads[i % len(payloads)]
            i += 1
            t0 = time.perf_counter()
            ok = False
            if transport == "grpc":
                try:
                    call(body, timeout=60)
                    ok = True
                except grpc.RpcError:
                    time.sleep(0.05)
            else:
                conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"})
                resp = conn.getresponse()
                resp.read()
                ok = resp.status == 200
                if not ok:
                    time.sleep(0.05)
            local.append((time.perf_counter() - t0, ok, SPANS_PER_REQUEST))
        with lock:
            results.extend(local)

    ts = [threading.Thread(target=run, args=(k * 7,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put(results)


def drive(transport: str, target: str, payloads: list[bytes], seconds: float, clients: int, rss_pid: int) -> dict[str, float]:
    procs_n = 2
    deadline = time.monotonic() + seconds
    q: mp.Queue = mp.Queue()
    procs = [mp.Process(target=_client_worker, args=(transport, target, payloads, deadline, q, max(1, clients // procs_n)))
             for _ in range(procs_n)]
    rss: list[int] = []
    started = time.monotonic()
    for p in procs:
        p.start()
    while any(p.is_alive() for p in procs) and time.monotonic() < deadline + 5:
        rss.append(rss_bytes(rss_pid))
        time.sleep(0.25)
        if not q.empty():
            break
    results: list[tuple[float, bool, int]] = []
    for _ in procs:
        results.extend(q.get(timeout=120))
    for p in procs:
        p.join(30)
    elapsed = time.monotonic() - started
    ok = [r for r in results if r[1]]
    lat = sorted(r[0] for r in ok) or [0.0]
    return {
        "spans_per_s": sum(r[2] for r in ok) / elapsed,
        "requests_ok": len(ok),
        "requests_refused": len(results) - len(ok),
        "p50_ms": 1000 * lat[len(lat) // 2],
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        "rss_mb_max": max(rss or [0]) / 1e6,
        "rss_mb_first": (rss or [0])[0] / 1e6,
        "rss_mb_last": (rss or [0])[-1] / 1e6,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_daemon(workdir: Path, **receiver: object) -> tuple[subprocess.Popen[bytes], int, int, Path]:
    gp, hp = _free_port(), _free_port()
    db = workdir / f"bench-{gp}.duckdb"
    cfg = workdir / f"bench-{gp}.yaml"
    cfg.write_text(yaml.safe_dump({
        "receiver": {"grpc": {"host": "127.0.0.1", "port": gp}, "http": {"host": "127.0.0.1", "port": hp},
                     "max_message_bytes": 64 << 20, **receiver},
        "store": {"path": str(db)}, "log_level": "WARNING",
    }))
    proc = subprocess.Popen([sys.executable, "-m", "tracescorer", "serve", "--config", str(cfg)], cwd=REPO)
    _wait_port(hp)
    return proc, gp, hp, db


def _wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"port {port} never opened")


def _stop(proc: subprocess.Popen[bytes] | mp.Process) -> None:
    if isinstance(proc, subprocess.Popen):
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    else:
        proc.terminate()
        proc.join(10)


def fmt(name: str, r: dict[str, float]) -> str:
    return (f"{name:<34} {r['spans_per_s']:>9.0f} spans/s  p50 {r['p50_ms']:>7.1f} ms  p99 {r['p99_ms']:>7.1f} ms  "
            f"ok {int(r['requests_ok']):>5}  refused {int(r['requests_refused']):>5}  "
            f"RSS max {r['rss_mb_max']:>6.0f} MB (first {r['rss_mb_first']:.0f}, last {r['rss_mb_last']:.0f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    payloads = make_payloads(40)
    print(f"payload: {SPANS_PER_REQUEST} spans/request, {statistics.mean(map(len, payloads)) / 1024:.0f} KiB avg; "
          f"{args.clients} clients; {args.seconds:g}s per run; cores: {os.cpu_count()}")
    bg, bh = _free_port(), _free_port()
    base = mp.Process(target=baseline_server, args=(bg, bh), daemon=True)
    base.start()
    _wait_port(bh)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for transport in ("grpc", "http"):
            target = f"127.0.0.1:{bg if transport == 'grpc' else bh}"
            results[f"baseline {transport}"] = drive(transport, target, payloads, args.seconds, args.clients, base.pid or 0)
            print(fmt(f"baseline (parse+walk) {transport}", results[f"baseline {transport}"]), flush=True)
            proc, gp, hp, db = start_daemon(Path(tmp))
            target = f"127.0.0.1:{gp if transport == 'grpc' else hp}"
            results[f"tracescorer {transport}"] = drive(transport, target, payloads, args.seconds, args.clients, proc.pid)
            _stop(proc)
            print(fmt(f"tracescorer (committed) {transport}", results[f"tracescorer {transport}"]), flush=True)
        # overload: a small write queue and twice the clients; memory must stay flat, refusals visible
        proc, gp, hp, db = start_daemon(Path(tmp), max_queue_items=2000)
        over = drive("grpc", f"127.0.0.1:{gp}", payloads, args.seconds, args.clients * 2, proc.pid)
        _stop(proc)
        print(fmt("tracescorer overload grpc (queue 2k)", over))
    _stop(base)
    print()
    for transport in ("grpc", "http"):
        ratio = results[f"tracescorer {transport}"]["spans_per_s"] / max(1.0, results[f"baseline {transport}"]["spans_per_s"])
        print(f"ratio tracescorer/baseline {transport}: {ratio:.0%}  (target >= 40%)")
    print(f"overload RSS first/last/max: {over['rss_mb_first']:.0f}/{over['rss_mb_last']:.0f}/{over['rss_mb_max']:.0f} MB, "
          f"refused {int(over['requests_refused'])} requests with RESOURCE_EXHAUSTED (retryable)")


if __name__ == "__main__":
    main()
