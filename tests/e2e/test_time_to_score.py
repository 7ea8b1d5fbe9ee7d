"""``tracescorer_time_to_score_seconds``: from a run's end to its score stored, per scorer.

In-process, on a clock the test moves (no waiting): the observed time is the clock's reading at the
commit minus the run's end as stored, in the bucket that holds it. Through ``tracescorer serve`` with
worker processes: a run that ended minutes ago lands in its bucket on the main process's /metrics
(the worker's histogram merged in), and ``tracescorer report`` shows the time to score.
"""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request
from pathlib import Path

from opentelemetry import trace
from opentelemetry.trace import Tracer
from support.clock import ManualClock
from support.daemon import DaemonProcess, config_dict, running_app, wait_for, wait_for_async
from support.db import fetch
from support.otlp import span_exporter, tracer

from tracescorer.config import Settings
from tracescorer.metrics.scores import TIME_TO_SCORE_BUCKETS

AHEAD_S = 100.0  # the App's clock is this far ahead of the machine's: the run ended ~100 s ago by it
AGO_S = 200.0  # the process test's run ended this long ago


def _buckets(exposition: str, scorer: str) -> dict[float, float]:
    """The cumulative bucket counts of ``scorer``'s time-to-score histogram, by upper bound."""
    out = {}
    for le, value in re.findall(
        r'^tracescorer_time_to_score_seconds_bucket\{le="([^"]+)",scorer="' + re.escape(scorer) + r'"\} (\S+)$',
        exposition,
        re.M,
    ):
        out[float(le)] = float(value)
    return out


def _only_in(buckets: dict[float, float], lo: float, hi: float) -> bool:
    """One observation, in the bucket (lo, hi]."""
    return buckets.get(lo) == 0.0 and buckets.get(hi) == 1.0 and buckets.get(float("inf")) == 1.0


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        return str(resp.read().decode())


def _ended_run(t: Tracer, ended_ns: int) -> None:
    """An agent run (invoke_agent > chat) that ended at ``ended_ns``."""
    agent = t.start_span(
        "invoke_agent weather",
        start_time=ended_ns - 2_000_000_000,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "weather",
            "gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "text", "content": "Sunny"}]}]',
        },
    )
    chat = t.start_span(
        "chat gpt-4o-mini",
        context=trace.set_span_in_context(agent),
        start_time=ended_ns - 1_500_000_000,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"},
    )
    chat.end(end_time=ended_ns - 500_000_000)
    agent.end(end_time=ended_ns)


async def test_the_time_to_score_is_read_on_the_apps_clock_at_the_commit(tmp_path: Path) -> None:
    clock = ManualClock(start=time.time() + AHEAD_S)
    cfg = config_dict(
        tmp_path,
        workers={"count": 0},
        assembly={"idle_s": 0.2},
        scorers=[{"id": "nonempty", "prebuilt": "non_empty_response"}],
    )
    async with running_app(Settings.model_validate(cfg), clock) as app:

        def send() -> None:
            with tracer(span_exporter("http", http_url=f"http://127.0.0.1:{app.http_port}")) as t:
                _ended_run(t, time.time_ns())

        await asyncio.to_thread(send)

        async def scored() -> list[tuple[int]]:
            clock.advance(0.1)  # assembly's idle_s passes on the same clock
            return await fetch(
                app.stores.queries,
                "SELECT epoch_us(target_ended_at) FROM scores WHERE scorer_id = 'nonempty' AND status = 'ok'",
            )

        [(ended_us,)] = await wait_for_async(scored, 60, interval_s=0.05, what="the run's score")
        exposition = await asyncio.to_thread(_scrape, f"http://127.0.0.1:{app.http_port}")
        buckets = _buckets(exposition, "nonempty")
        assert set(buckets) == {*map(float, TIME_TO_SCORE_BUCKETS), float("inf")}
        assert _only_in(buckets, 60.0, 120.0), buckets
        [observed] = re.findall(r'^tracescorer_time_to_score_seconds_sum\{scorer="nonempty"\} (\S+)$', exposition, re.M)
        # the clock moved by at most one more step after the commit, before the row was seen
        expected = clock.time() - ended_us / 1e6
        assert expected - 0.1 - 1e-6 <= float(observed) <= expected + 1e-6


def test_a_worker_processes_score_lands_in_its_bucket_on_metrics_and_in_the_report(tmp_path: Path) -> None:
    cfg = config_dict(
        tmp_path,
        workers={"count": 1},
        assembly={"idle_s": 0.2},
        scorers=[{"id": "nonempty", "prebuilt": "non_empty_response"}],
    )
    daemon = DaemonProcess(tmp_path, cfg).start()
    try:
        with tracer(span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint)) as t:
            _ended_run(t, time.time_ns() - int(AGO_S * 1e9))
        # 200 s ago, plus how long the daemon took: in (120, 300] unless that took 100 s
        buckets = wait_for(
            lambda: (b := _buckets(_scrape(daemon.http_url), "nonempty")) and b.get(float("inf")) and b,
            60,
            interval_s=0.1,
            what="the score's time to score on /metrics",
        )
        assert _only_in(buckets, 120.0, 300.0), buckets
        out = daemon.cli("report", "--output", str(tmp_path / "r.html")).stdout
        assert "1 score(s)" in out
        page = (tmp_path / "r.html").read_text()
        tile = re.search(r"time to score p50 / p99</span><b>([0-9.]+) min / ([0-9.]+) min</b>", page)
        assert tile is not None, page
        assert all(AGO_S / 60 <= float(v) <= 5 for v in tile.groups())
    finally:
        assert daemon.stop() == 0
