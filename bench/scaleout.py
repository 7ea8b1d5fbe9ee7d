"""Scale-out benchmark: 1 vs 2 ``tracescorer serve`` daemons on one PostgreSQL, same offered load.

A throw-away PostgreSQL 15 (initdb + pg_ctl in a temp directory, fsync ON, as the tests' server
but durable) and the tests' fake OpenAI server (in its own process, answering every judge call
after ``--judge-delay-ms``). Each daemon has its own DuckDB span log and shares the results in
PostgreSQL; the client sends each trace to ``daemon[trace_id % n]`` as the Collector's
loadbalancing exporter does (OTel SDK, BatchSpanProcessor, OTLP/gRPC), at ``--rate`` traces/s
for ``--seconds``: conversations of ``--turns`` turns, interleaved so that turns of one
conversation land on different daemons. Bindings: a run-scope code scorer and a
conversation-scope LLM judge (``multi_turn_judge``).

Figures per configuration, from SQL over PostgreSQL once every conversation is settled:
scores/s (first to last score stored, run and conversation scope), latency p50/p99 from trace
complete (its root span's end) to its run score stored (``scores.created_at``) and from a
conversation's last turn to its score stored (includes ``conversation_idle_s``), PostgreSQL rows
written per second (``pg_stat_database`` inserts+updates+deletes over the load), lease conflicts
(claims taken over after their lease ran out, claims lost while scoring), judge calls per
conversation scored.

    .venv/bin/python bench/scaleout.py [--rate 40] [--seconds 20] [--turns 4] [--judge-delay-ms 50]

Bounded: about 2 minutes with the defaults. On 2 cores a speed-up is not expected (the daemons,
PostgreSQL and the load generator share them); the figures size a deployment.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from support.daemon import DaemonProcess, config_dict, wait_for  # noqa: E402
from support.postgres import create_database, start_server  # noqa: E402
from support.routing import Acked, RoutingExporter, SequentialTraceIds  # noqa: E402

IDLE_S = 0.5
CONVERSATION_IDLE_S = 5.0


def _judge_server(delay_ms: int) -> tuple[subprocess.Popen[bytes], str]:
    """The fake judge in its own process (so its event loop does not compete with the client)."""
    script = (
        "import sys, time, signal\n"
        f"sys.path[:0] = [{str(REPO)!r}, {str(REPO / 'tests')!r}]\n"
        "from fakes.fake_openai import FakeOpenAI, Reply\n"
        f"fake = FakeOpenAI(default=Reply.json({{'satisfied': True, 'reasoning': 'ok'}}, delay_s={delay_ms / 1000}))\n"
        "fake.start(); print(fake.base_url, flush=True)\n"
        "signal.sigwait([signal.SIGTERM])\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().decode().strip()


def _config(home: Path, dsn: str, judge_url: str) -> dict[str, Any]:
    home.mkdir(parents=True)
    return config_dict(
        home,
        store={"backend": "postgres", "postgres": {"dsn": dsn, "claim_interval_s": 0.5, "claim_lease_s": 30}},
        assembly={"idle_s": IDLE_S, "conversation_idle_s": CONVERSATION_IDLE_S},
        judge={"model": "openai/gpt-4o-mini", "api_base": judge_url, "api_key": "k", "requests_per_minute": 100_000},
        scorers=[
            {"id": "run-code", "prebuilt": "non_empty_response", "scope": "run"},
            {
                "id": "conversation-judge",
                "prebuilt": "multi_turn_judge",
                "scope": "conversation",
                "options": {"criterion": "The agent answered"},
            },
        ],
        log_level="WARNING",
    )


def _send(endpoints: list[str], rate: float, seconds: float, turns: int, tag: str) -> tuple[int, Acked]:
    """Traces at ``rate``/s: turn k of a window of conversations, then turn k+1, ... (paced)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    acked = Acked(len(endpoints))
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}), id_generator=SequentialTraceIds(1))
    provider.add_span_processor(BatchSpanProcessor(RoutingExporter(endpoints, acked), schedule_delay_millis=100))
    tracer = provider.get_tracer("bench")
    total = int(rate * seconds)
    window = max(1, int(rate))  # conversations in flight: one second's worth of traces per turn round
    sent = 0
    started = time.monotonic()
    conversation = 0
    while sent < total:
        ids = [f"{tag}-{conversation + i}" for i in range(window)]
        conversation += window
        for turn in range(turns):
            for cid in ids:
                if sent >= total:
                    break
                with (
                    tracer.start_as_current_span(
                        "invoke_agent support",
                        attributes={
                            "gen_ai.operation.name": "invoke_agent",
                            "gen_ai.agent.name": "support",
                            "gen_ai.conversation.id": cid,
                            "gen_ai.input.messages": json.dumps(
                                [{"role": "user", "parts": [{"type": "text", "content": f"question {turn} of {cid}"}]}]
                            ),
                            "gen_ai.output.messages": json.dumps(
                                [
                                    {
                                        "role": "assistant",
                                        "parts": [{"type": "text", "content": f"answer {turn}"}],
                                        "finish_reason": "stop",
                                    }
                                ]
                            ),
                        },
                    ),
                    tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}),
                ):
                    pass
                sent += 1
                lag = started + sent / rate - time.monotonic()
                if lag > 0:
                    time.sleep(lag)
    provider.force_flush()
    provider.shutdown()
    return sent, acked


def _metric(daemon: DaemonProcess, prefix: str) -> float:
    text = urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


def _pg_rows(server: Any, dsn_db: str) -> int:
    out = server.psql(
        f"SELECT tup_inserted + tup_updated + tup_deleted FROM pg_stat_database WHERE datname = '{dsn_db}'"
    )
    return int(out.strip() or 0)


def run_config(n: int, server: Any, judge_url: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    dsn = create_database(server, prefix=f"scaleout{n}")
    dbname = dsn.rsplit("/", 1)[1]
    daemons = [DaemonProcess(root / f"d{n}-{i}", _config(root / f"d{n}-{i}", dsn, judge_url)) for i in range(n)]
    for d in daemons:
        d.start(timeout_s=60)
    try:
        rows_before = _pg_rows(server, dbname)
        t0 = time.time()
        sent, acked = _send([d.grpc_endpoint for d in daemons], args.rate, args.seconds, args.turns, f"n{n}")
        send_s = time.time() - t0
        conversations = -(-sent // args.turns)
        q = daemons[0].query_json
        wait_for(
            lambda: (
                q("SELECT count(*) AS n FROM scores WHERE scorer_id = 'run-code'")[0]["n"] >= sent
                and q(
                    "SELECT count(*) AS n FROM conversation_activity WHERE scored_seq = activity_seq "
                    "AND claimed_by IS NULL"
                )[0]["n"]
                >= conversations
            ),
            300,
            interval_s=0.5,
            what="every run and conversation scored",
        )
        rows_after = _pg_rows(server, dbname)
        (stats,) = q(
            "SELECT count(*) AS scores, EXTRACT(EPOCH FROM max(created_at) - min(created_at))::float8 AS span_s "
            "FROM scores"
        )
        (run_lat,) = q(
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY l) AS p50, percentile_cont(0.99) WITHIN GROUP "
            "(ORDER BY l) AS p99 FROM (SELECT EXTRACT(EPOCH FROM s.created_at)::float8 - r.ended_at_unix_nano / 1e9 AS l "
            "FROM scores s JOIN runs r ON r.run_id = s.run_id WHERE s.scorer_id = 'run-code') x"
        )
        (conv_lat,) = q(
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY l) AS p50, percentile_cont(0.99) WITHIN GROUP "
            "(ORDER BY l) AS p99 FROM (SELECT EXTRACT(EPOCH FROM s.created_at)::float8 - max(r.ended_at_unix_nano) / 1e9 "
            "AS l FROM scores s JOIN runs r ON r.conversation_id = s.conversation_id "
            "WHERE s.scorer_id = 'conversation-judge' GROUP BY s.id, s.created_at) x"
        )
        (claims,) = q("SELECT coalesce(sum(takeovers), 0) AS takeovers FROM conversation_activity")
        lost = sum(_metric(d, 'tracescorer_conversation_claims_total{outcome="lost"}') for d in daemons)
        claimed = sum(_metric(d, 'tracescorer_conversation_claims_total{outcome="claimed"}') for d in daemons)
        load_s = max(stats["span_s"] or 0.0, send_s)
        return {
            "daemons": n,
            "traces_sent": sent,
            "send_s": round(send_s, 1),
            "conversations": conversations,
            "scores": stats["scores"],
            "scores_per_s": round(stats["scores"] / max(stats["span_s"] or 1e-9, 1e-9), 1),
            "run_latency_p50_s": round(run_lat["p50"], 3),
            "run_latency_p99_s": round(run_lat["p99"], 3),
            "conversation_latency_p50_s": round(conv_lat["p50"], 3),
            "conversation_latency_p99_s": round(conv_lat["p99"], 3),
            "pg_rows_written": rows_after - rows_before,
            "pg_rows_per_s": round((rows_after - rows_before) / load_s, 1),
            "claims": int(claimed),
            "lease_takeovers": int(claims["takeovers"]),
            "claims_lost": int(lost),
            "claims_per_conversation": round(claimed / max(1, conversations), 3),
            "acked_spans_per_daemon": [len(s) for s in acked.spans],
            "export_failures": acked.failed,
        }
    finally:
        for d in daemons:
            d.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=40, help="traces per second offered")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--judge-delay-ms", type=int, default=50)
    args = parser.parse_args()
    server = start_server(durable=True)
    judge, judge_url = _judge_server(args.judge_delay_ms)
    root = Path(tempfile.mkdtemp(prefix="tracescorer-scaleout-"))
    try:
        results = [run_config(n, server, judge_url, args, root) for n in (1, 2)]
    finally:
        judge.terminate()
        judge.wait(10)
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"offered: {args.rate:g} traces/s for {args.seconds:g}s, {args.turns} turns per conversation, "
        f"judge delay {args.judge_delay_ms} ms, PostgreSQL fsync on, {os.cpu_count()} cores"
    )
    keys = list(results[0])
    width = max(len(k) for k in keys)
    for key in keys:
        print(f"{key:<{width}}  " + "  ".join(f"{r[key]!s:>16}" for r in results))


if __name__ == "__main__":
    main()
