"""End-to-end scoring benchmark: agent traffic at a fixed rate through ``tracescorer serve``.

The daemon runs as a child process (free ports, throw-away DuckDB) with ``assembly.idle_s: 0.2``
and three run-scope bindings: two code scorers (``non_empty_response``, ``no_tool_errors``) and
one LLM judge (``answer_relevancy``) pointed at the tests' fake OpenAI server, which answers
every judge call after a FIXED delay (``--judge-delay-ms``, default 50 ms) and runs in its own
process (``judge.max_concurrency`` 16, ``requests_per_minute`` high enough not to throttle).
Agent runs (``invoke_agent`` > chat, execute_tool, chat with GenAI message JSON, like
``tracescorer demo``) are sent through the OpenTelemetry SDK (BatchSpanProcessor with a 100 ms
schedule delay, OTLP/gRPC). Phases, each tagged by its agent name: the lowest fixed rate, a
burst (``--burst`` runs as fast as the SDK sends: the daemon's capacity), then the higher rates.
After each phase the bench waits up to ``--drain`` seconds for every decision.

Figures per phase, from SQL over the database after the daemon stopped (opened read-only):
runs scored per second per scorer (first to last score committed), latency from run
completion (root span end) to score committed (``scores.created_at``) p50/p99/max with its
median parts (span end -> received -> assembled -> scored), decisions by kind (``rate_limited``
included); from the daemon's process and ``/metrics``: RSS (VmRSS), scoring/write queue depth,
buffered traces, store commit and judge call latency (histogram buckets).

Baseline, in the same run: the same bound scorers called in-process (``scorer.run`` on the
same stored runs, no daemon, no database; code scorers one at a time, the judge with the same
concurrency against the same fake). Ratios: scored/offered per fixed rate, burst scored/s vs
the baseline.

    .venv/bin/python bench/e2e.py [--rates 20,50] [--seconds 10] [--burst 200] [--drain 20]
                                  [--judge-delay-ms 50]

Bounded: about 1.5 minutes with the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import yaml  # noqa: E402
from benchutil import rss_bytes  # noqa: E402 - bench/ is the script's own folder

from tracescorer import control  # noqa: E402

SCORERS = ("non-empty-response", "no-tool-errors", "answer-relevancy")
JUDGE_CONCURRENCY = 16

# The fake judge in its own process (no GIL shared with the load generator): every call is
# answered after the fixed delay with a valid answer_relevancy verdict and a fixed token usage
# (so litellm prices it as gpt-4o-mini).
SERVER_CODE = """
import sys
from tests.fakes import FakeOpenAI, Reply
verdicts = {{"verdicts": [{{"statement": "It answers the question.", "verdict": "yes", "reason": "on topic"}},
                          {{"statement": "It adds a tip.", "verdict": "unsure", "reason": "partly"}}]}}
server = FakeOpenAI(default=Reply.json(verdicts, delay_s={delay}, usage={{"prompt_tokens": 300, "completion_tokens": 40}}))
server.start()
print(server.base_url, flush=True)
sys.stdin.read()
print(len(server.requests), flush=True)
server.stop()
"""

QUESTIONS: list[tuple[str, str | None, dict[str, str] | None, str | None, str]] = [
    (
        "What's the weather in London tomorrow?",
        "get_weather",
        {"city": "London"},
        "Rain, 14C",
        "Tomorrow in London: rain and 14C. Take an umbrella.",
    ),
    (
        "And in Paris?",
        "get_weather",
        {"city": "Paris"},
        "Sunny, 22C",
        "Paris will be sunny and 22C, light clothes are fine.",
    ),
    (
        "I want a refund for order 1234.",
        None,
        None,
        None,
        "I'm sorry to hear that. Could you tell me why you want a refund?",
    ),
    (
        "Book me a hotel in Rome for Friday.",
        "book_hotel",
        {"city": "Rome", "day": "Friday"},
        "ERROR: upstream timeout",
        "Sorry, the booking service failed. Please try again later.",
    ),
]


# --- the daemon -----------------------------------------------------------------------------------


def daemon_config(db: Path, judge_url: str) -> dict[str, Any]:
    return {
        "receiver": {"grpc": {"host": "127.0.0.1", "port": 0}, "http": {"host": "127.0.0.1", "port": 0}},
        "api": {"port": 0},
        "store": {"path": str(db)},
        "assembly": {"idle_s": 0.2, "conversation_idle_s": 2.0},
        "judge": {
            "model": "openai/gpt-4o-mini",
            "api_base": judge_url,
            "api_key": "x",
            "max_concurrency": JUDGE_CONCURRENCY,
            "requests_per_minute": 60000,
            "timeout_s": 30,
        },
        "scorers": [
            {"id": "non-empty-response", "prebuilt": "non_empty_response", "scope": "run", "threshold": 1},
            {"id": "no-tool-errors", "prebuilt": "no_tool_errors", "scope": "run", "threshold": 1},
            {"id": "answer-relevancy", "prebuilt": "answer_relevancy", "scope": "run", "threshold": 0.5},
        ],
        # bounded stop: targets still queued then get no decision (a restart's recovery would score them)
        "scoring": {"shutdown_timeout_s": 5},
        "log_level": "WARNING",
    }


def scrape(url: str) -> dict[str, float]:
    """``/metrics`` as {"name{labels}": value} (label order as exposed)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


def total(metrics: dict[str, float], name: str, **labels: str) -> float:
    want = [f"{k}={v}" for k, v in labels.items()]
    sum_ = 0.0
    for key, value in metrics.items():
        base, _, rest = key.partition("{")
        if base == name and all(w in rest.rstrip("}").split(",") for w in want):
            sum_ += value
    return sum_


def hist_quantile(before: dict[str, float], after: dict[str, float], name: str, q: float) -> float:
    """``q`` quantile of a histogram's observations between two scrapes (upper bucket bound,
    like Prometheus' histogram_quantile without the interpolation)."""
    buckets: list[tuple[float, float]] = []
    for key, value in after.items():
        base, _, rest = key.partition("{")
        if base == f"{name}_bucket":
            le = dict(kv.split("=", 1) for kv in rest.rstrip("}").split(",") if kv)["le"]
            buckets.append((float(le), value - before.get(key, 0.0)))
    buckets.sort()
    count = buckets[-1][1] if buckets else 0.0
    for bound, cumulative in buckets:
        if count and cumulative >= q * count:
            return bound
    return 0.0


@dataclass
class Sampler:
    """Samples the daemon's RSS and queue gauges in a background thread while a phase runs."""

    pid: int
    url: str
    rss: list[int] = field(default_factory=list)
    gauges: dict[str, float] = field(default_factory=dict)  # max seen per gauge
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    GAUGES = {
        "scoring queue judge": ("tracescorer_scoring_queue_depth", {"pool": "judge"}),
        "scoring queue code": ("tracescorer_scoring_queue_depth", {"pool": "code"}),
        "write queue": ("tracescorer_store_queue_items", {}),
        "buffered traces": ("tracescorer_assembly_buffered_traces", {}),
    }

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        tick = 0
        while not self._stop.is_set():
            self.rss.append(rss_bytes(self.pid))
            if tick % 2 == 0:
                try:
                    m = scrape(self.url)
                except OSError:
                    m = {}
                for label, (name, labels) in self.GAUGES.items():
                    self.gauges[label] = max(self.gauges.get(label, 0.0), total(m, name, **labels))
            tick += 1
            self._stop.wait(0.25)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


# --- the agents ---------------------------------------------------------------------------------


class Agents:
    """OTel GenAI agent runs sent through the SDK's BatchSpanProcessor + OTLP/gRPC exporter."""

    def __init__(self, grpc_endpoint: str) -> None:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.provider = TracerProvider(resource=Resource.create({"service.name": "bench-agents"}))
        # a short schedule delay: the SDK's default 5 s would dominate the latency measured
        self.provider.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=grpc_endpoint, insecure=True),
                max_queue_size=65536,
                schedule_delay_millis=100,
                max_export_batch_size=512,
            )
        )
        self.tracer = self.provider.get_tracer("tracescorer.bench")
        self.sent = 0

    def run(self, agent: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        i = self.sent
        user, tool, args, result, answer = QUESTIONS[i % len(QUESTIONS)]
        model_attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.provider.name": "openai",
            "gen_ai.usage.input_tokens": 42,
            "gen_ai.usage.output_tokens": 17,
        }
        with self.tracer.start_as_current_span(
            f"invoke_agent {agent}",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent,
                "gen_ai.conversation.id": f"{agent}-conv-{i // 3}",
                "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Answer briefly."}]),
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": f"{user} (request {i})"}]}]
                ),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
                ),
            },
        ):
            with self.tracer.start_as_current_span("chat gpt-4o-mini", attributes=model_attrs):
                pass
            if tool and result is not None:
                with self.tracer.start_as_current_span(
                    f"execute_tool {tool}",
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.id": f"call_{i}",
                        "gen_ai.tool.call.arguments": json.dumps(args),
                        "gen_ai.tool.call.result": result,
                    },
                ) as tool_span:
                    if result.startswith("ERROR"):
                        tool_span.set_status(Status(StatusCode.ERROR, result))
            with self.tracer.start_as_current_span("chat gpt-4o-mini", attributes=model_attrs):
                pass
        self.sent += 1

    def at_rate(self, agent: str, rate: float, seconds: float) -> tuple[int, float]:
        """Send ``rate`` runs/s for ``seconds`` (open loop: late runs are sent at once, not skipped).
        Returns (runs sent, worst lag behind schedule in seconds)."""
        n = int(rate * seconds)
        start = time.perf_counter()
        lag = 0.0
        for k in range(n):
            due = start + k / rate
            now = time.perf_counter()
            if due > now:
                time.sleep(due - now)
            else:
                lag = max(lag, now - due)
            self.run(agent)
        self.provider.force_flush()
        return n, lag

    def burst(self, agent: str, count: int) -> int:
        for _ in range(count):
            self.run(agent)
        self.provider.force_flush()
        return count

    def close(self) -> None:
        self.provider.shutdown()


# --- phases -------------------------------------------------------------------------------------


@dataclass
class Phase:
    name: str
    agent: str
    offered: float | None  # runs/s, None for the burst
    runs: int = 0
    send_s: float = 0.0
    lag_s: float = 0.0
    drained: bool = False
    rss_max: float = 0.0
    gauges: dict[str, float] = field(default_factory=dict)
    rate_limited_metric: float = 0.0
    commit_ms: tuple[float, float] = (0.0, 0.0)
    judge_ms: tuple[float, float] = (0.0, 0.0)


def wait_decided(url: str, before: float, expected: int, timeout_s: float) -> bool:
    """Until ``expected`` more scoring decisions (every kind) than ``before`` are counted."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if total(scrape(url), "tracescorer_scoring_decisions_total") - before >= expected:
            return True
        time.sleep(0.2)
    return False


def run_phase(
    agents: Agents, info: control.ServeInfo, pid: int, phase: Phase, seconds: float, burst: int, drain_s: float
) -> None:
    before = scrape(info.url)
    sampler = Sampler(pid, info.url).start()
    t0 = time.perf_counter()
    if phase.offered is not None:
        phase.runs, phase.lag_s = agents.at_rate(phase.agent, phase.offered, seconds)
    else:
        phase.runs = agents.burst(phase.agent, burst)
    phase.send_s = time.perf_counter() - t0
    phase.drained = wait_decided(
        info.url, total(before, "tracescorer_scoring_decisions_total"), phase.runs * len(SCORERS), timeout_s=drain_s
    )
    sampler.stop()
    after = scrape(info.url)
    phase.rss_max = max(sampler.rss or [0]) / 1e6
    phase.gauges = sampler.gauges
    phase.commit_ms = (
        hist_quantile(before, after, "tracescorer_store_commit_seconds", 0.5) * 1000,
        hist_quantile(before, after, "tracescorer_store_commit_seconds", 0.99) * 1000,
    )
    phase.judge_ms = (
        hist_quantile(before, after, "tracescorer_judge_call_seconds", 0.5) * 1000,
        hist_quantile(before, after, "tracescorer_judge_call_seconds", 0.99) * 1000,
    )
    phase.rate_limited_metric = total(after, "tracescorer_scoring_decisions_total", decision="rate_limited") - total(
        before, "tracescorer_scoring_decisions_total", decision="rate_limited"
    )


# --- figures from the database --------------------------------------------------------------------

LATENCY_SQL = """
WITH s AS (
  SELECT s.scorer_id, s.status, r.agent_name,
         r.ended_at_unix_nano / 1e6 AS ended_ms,
         epoch_us(sp.received_at) / 1e3 AS received_ms,
         epoch_us(a.assembled_at) / 1e3 AS assembled_ms,
         epoch_us(s.created_at) / 1e3 AS scored_ms
  FROM scores s JOIN runs r USING (run_id)
  LEFT JOIN spans sp ON sp.trace_id = r.trace_id AND sp.span_id = r.span_id
  LEFT JOIN assembled_traces a ON a.trace_id = r.trace_id
  WHERE r.agent_name = ?
)
SELECT scorer_id, count(*) AS n, count(*) FILTER (status = 'ok') AS ok,
       (max(scored_ms) - min(ended_ms)) / 1e3 AS span_s,
       (max(scored_ms) - max(ended_ms)) AS drain_ms,
       quantile_cont(scored_ms - ended_ms, 0.5) AS p50, quantile_cont(scored_ms - ended_ms, 0.99) AS p99,
       max(scored_ms - ended_ms) AS worst,
       quantile_cont(received_ms - ended_ms, 0.5) AS to_received,
       quantile_cont(assembled_ms - received_ms, 0.5) AS to_assembled,
       quantile_cont(scored_ms - assembled_ms, 0.5) AS to_scored,
       quantile_cont(scored_ms - assembled_ms, 0.99) AS to_scored_p99
FROM s GROUP BY scorer_id ORDER BY scorer_id
"""

DECISIONS_SQL = """
SELECT d.decision, count(*) FROM scoring_decisions d JOIN runs r ON d.target_type = 'run' AND d.target_id = r.run_id
WHERE r.agent_name = ? GROUP BY ALL ORDER BY ALL
"""


def report_phase(con: Any, phase: Phase) -> float:
    """Print a phase's figures; returns its scored/s (all scorers done, per run)."""
    runs_stored = con.execute("SELECT count(*) FROM runs WHERE agent_name = ?", [phase.agent]).fetchone()[0]
    offered = f"{phase.offered:g} runs/s offered" if phase.offered else "burst, as fast as the SDK sends"
    undecided = con.execute(
        "SELECT count(*) FROM runs r WHERE agent_name = ? AND (SELECT count(*) FROM scoring_decisions d "
        "WHERE d.target_type = 'run' AND d.target_id = r.run_id) < ?",
        [phase.agent, len(SCORERS)],
    ).fetchone()[0]
    print(
        f"\n== {phase.name}: {offered}; sent {phase.runs} runs in {phase.send_s:.1f} s "
        f"({phase.runs / max(phase.send_s, 1e-9):.0f}/s, worst send lag {phase.lag_s * 1000:.0f} ms); "
        f"runs stored {runs_stored}; "
        + (
            "all decided"
            if phase.drained
            else f"NOT all decided within --drain (decided during the 5 s shutdown grace: {phase.runs - undecided} "
            f"of {phase.runs} runs; {undecided} without every decision)"
        )
    )
    print(
        f"   {'scorer':<20}{'scores':>7}{'ok':>6}{'scored/s':>10}{'drain ms':>10}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'max ms':>9}   median parts: end->received->assembled->scored (p99 of last)"
    )
    slowest = float("inf")
    rows = con.execute(LATENCY_SQL, [phase.agent]).fetchall()
    for scorer, n, ok, span_s, drain, p50, p99, worst, rec, asm, sc, sc99 in rows:
        rate = n / span_s if span_s else 0.0  # first run ended -> last score committed
        slowest = min(slowest, rate)
        print(
            f"   {scorer:<20}{n:>7}{ok:>6}{rate:>10.1f}{drain:>10.0f}{p50:>9.0f}{p99:>9.0f}{worst:>9.0f}"
            f"   {rec:.0f} + {asm:.0f} + {sc:.0f} ms ({sc99:.0f})"
        )
    decisions = ", ".join(f"{d} {c}" for d, c in con.execute(DECISIONS_SQL, [phase.agent]).fetchall())
    gauges = ", ".join(f"{k} {v:.0f}" for k, v in phase.gauges.items())
    print(
        f"   decisions: {decisions}; rate_limited on /metrics: {phase.rate_limited_metric:.0f}; "
        f"store commit p50/p99 {phase.commit_ms[0]:.0f}/{phase.commit_ms[1]:.0f} ms, "
        f"judge call p50/p99 {phase.judge_ms[0]:.0f}/{phase.judge_ms[1]:.0f} ms (histogram buckets)"
    )
    print(f"   daemon RSS max {phase.rss_max:.0f} MB; max seen on /metrics: {gauges}")
    return slowest if slowest != float("inf") else 0.0


# --- baseline: the same scorers in-process --------------------------------------------------------


async def _baseline(config: Path, db: Path, agent: str, limit: int) -> dict[str, float]:
    import duckdb

    from tracescorer.config import load_settings
    from tracescorer.runner.bindings import build_bindings
    from tracescorer.store.runs import RUN_SELECT, run_from_row

    settings = load_settings(config)
    bound = build_bindings(settings.scorers, settings.judge)
    with duckdb.connect(str(db), read_only=True) as con:
        runs = [
            run_from_row(r)
            for r in con.execute(
                RUN_SELECT + " WHERE agent_name = ? ORDER BY started_at_unix_nano LIMIT ?", [agent, limit]
            ).fetchall()
        ]
    rates: dict[str, float] = {}
    for b in bound:
        for run in runs[:8]:  # warm-up (imports, connections)
            await b.scorer.run(run)
        gate = asyncio.Semaphore(JUDGE_CONCURRENCY if b.uses_judge else 1)

        async def one(run: Any, scorer: Any = b.scorer) -> None:
            async with gate:
                result = await scorer.run(run)
                assert result.status == "ok", result  # bench sanity

        started = time.perf_counter()
        await asyncio.gather(*(one(r) for r in runs))
        rates[b.binding.id] = len(runs) / (time.perf_counter() - started)
    # all three on every run, judge calls concurrent, code scorers inline: the pipeline's capacity
    gate = asyncio.Semaphore(JUDGE_CONCURRENCY)

    async def all_three(run: Any) -> None:
        async with gate:
            for b in bound:
                await b.scorer.run(run)

    started = time.perf_counter()
    await asyncio.gather(*(all_three(r) for r in runs))
    rates["all"] = len(runs) / (time.perf_counter() - started)
    rates["runs"] = len(runs)
    return rates


# --- main ---------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="20,50", help="fixed rates in runs/s, comma separated")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per fixed-rate phase")
    parser.add_argument("--burst", type=int, default=200, help="runs in the burst phase (0 = none)")
    parser.add_argument(
        "--drain",
        type=float,
        default=20.0,
        help="most seconds to wait after a phase for every decision (keeps the bench bounded)",
    )
    parser.add_argument("--judge-delay-ms", type=float, default=50.0)
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",") if r]
    print(
        f"bench e2e: rates {rates} runs/s x {args.seconds:g} s, burst {args.burst}; judge fake fixed "
        f"latency {args.judge_delay_ms:g} ms, judge.max_concurrency {JUDGE_CONCURRENCY}; "
        f"scorers {', '.join(SCORERS)} (all scope run); cores {os.cpu_count()}",
        flush=True,
    )
    started = time.monotonic()
    judge = subprocess.Popen(
        [sys.executable, "-c", SERVER_CODE.format(delay=args.judge_delay_ms / 1000)],
        cwd=ROOT,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert judge.stdout is not None and judge.stdin is not None
    judge_url = judge.stdout.readline().strip()
    if not judge_url.startswith("http"):
        print("fake judge did not start", file=sys.stderr)
        return 1
    workdir = Path(tempfile.mkdtemp(prefix="tracescorer-bench-e2e-"))
    db, config = workdir / "bench.duckdb", workdir / "tracescorer.yaml"
    config.write_text(yaml.safe_dump(daemon_config(db, judge_url)))
    log = open(workdir / "daemon.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracescorer", "serve", "--config", str(config)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    # the lowest rate, then the burst (capacity, on a drained daemon), then the higher rates
    phases = [Phase(f"fixed {r:g}/s", f"bench-{r:g}rps", r) for r in sorted(rates)]
    if args.burst:
        phases.insert(1, Phase(f"burst {args.burst}", "bench-burst", None))
    judge_calls = 0
    exit_code = None
    rss_idle = 0.0
    try:
        info = control.wait_for_daemon(str(db), proc)
        if info is None:
            print((workdir / "daemon.log").read_text(), file=sys.stderr)
            print("daemon failed to start", file=sys.stderr)
            return 1
        agents = Agents(f"127.0.0.1:{info.grpc_port}")
        agents.run("bench-warmup")  # first judge call pays litellm's import in the daemon
        agents.provider.force_flush()
        wait_decided(info.url, 0, len(SCORERS), timeout_s=60)
        rss_idle = rss_bytes(proc.pid) / 1e6
        print(f"daemon up (pid {proc.pid}), warm-up run scored; RSS {rss_idle:.0f} MB", flush=True)
        for phase in phases:
            run_phase(agents, info, proc.pid, phase, args.seconds, args.burst, args.drain)
            print(f"   {phase.name}: {phase.runs} runs sent, decided: {phase.drained}", flush=True)
            time.sleep(0.5)
        agents.close()
        final = scrape(info.url)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            exit_code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            exit_code = proc.wait()
        log.close()
        if exit_code is None:
            judge.kill()
    print(f"daemon stopped with exit code {exit_code}")

    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    scored_rates = {p.name: report_phase(con, p) for p in phases}
    cost = con.execute(
        "SELECT sum(judge_cost_usd), sum(judge_input_tokens), sum(judge_output_tokens) FROM scores"
    ).fetchone() or (0, 0, 0)
    con.close()
    print(
        f"\n/metrics at the end: judge calls {total(final, 'tracescorer_judge_calls_total'):.0f} "
        f"(ok {total(final, 'tracescorer_judge_calls_total', status='ok'):.0f}), "
        f"judge cost ${total(final, 'tracescorer_score_judge_cost_usd_total'):.4f} (scores table ${cost[0] or 0:.4f}, "
        f"{cost[1] or 0} in / {cost[2] or 0} out tokens), "
        f"items rejected {total(final, 'tracescorer_receiver_items_rejected_total'):.0f}, "
        f"runs {total(final, 'tracescorer_assembly_runs_total'):.0f}, "
        f"unmatched traces {total(final, 'tracescorer_assembly_traces_unmatched_total'):.0f}"
    )
    print(
        f"gauges after the last phase: scoring queue judge "
        f"{total(final, 'tracescorer_scoring_queue_depth', pool='judge'):.0f} / code "
        f"{total(final, 'tracescorer_scoring_queue_depth', pool='code'):.0f}, write queue "
        f"{total(final, 'tracescorer_store_queue_items'):.0f}, buffered traces "
        f"{total(final, 'tracescorer_assembly_buffered_traces'):.0f}"
    )

    baseline_agent = phases[-1].agent
    try:
        base = asyncio.run(_baseline(config, db, baseline_agent, limit=300))
    finally:
        judge.stdin.close()
        try:
            judge_calls = int((judge.stdout.readline() or "0").strip())
            judge.wait(10)
        except (subprocess.TimeoutExpired, ValueError):
            judge.kill()
    print(
        f"\n== baseline: the same bound scorers in-process (scorer.run on {base['runs']:.0f} stored runs, "
        f"no daemon; judge concurrency {JUDGE_CONCURRENCY}, same fake)"
    )
    print("   " + ", ".join(f"{k} {v:.0f} runs/s" for k, v in base.items() if k not in ("runs", "all")))
    print(
        f"   all three per run: {base['all']:.0f} runs/s  (judge-latency bound: "
        f"{JUDGE_CONCURRENCY / (args.judge_delay_ms / 1000):.0f}/s); the fake judge served {judge_calls} "
        "requests in all (daemon + baseline)"
    )
    print()
    for phase in phases:
        got = scored_rates[phase.name]
        if phase.offered:
            print(
                f"{phase.name}: slowest scorer {got:.1f} runs/s scored = {got / phase.offered:.0%} of offered; "
                f"offered = {phase.offered / base['all']:.0%} of the in-process capacity"
            )
        else:
            print(
                f"{phase.name}: slowest scorer {got:.1f} runs/s scored = {got / base['all']:.0%} of the in-process "
                f"baseline ({base['all']:.0f} runs/s)"
            )
    print(
        f"daemon RSS idle {rss_idle:.0f} MB, max {max(p.rss_max for p in phases):.0f} MB; "
        f"total bench time {time.monotonic() - started:.0f} s"
    )
    import shutil

    shutil.rmtree(workdir, ignore_errors=True)
    return 0 if exit_code == 0 and all(p.drained for p in phases) else 1


if __name__ == "__main__":
    sys.exit(main())
