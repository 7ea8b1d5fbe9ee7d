"""A real collector in front of the daemon: OTel SDK → rotel (OTLP gRPC in, OTLP/HTTP out) →
tracescorer. Spans arrive and are scored; a 429 the daemon answers under backpressure is retried
by rotel and nothing is lost."""

from __future__ import annotations

import socket
import subprocess
import urllib.request

import pytest
from opentelemetry import context, trace
from support.daemon import DaemonProcess, plain_config, wait_for
from support.rotel import RotelUnavailable, agent

from tracescorer.demo import emit_conversations


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _metric(daemon: DaemonProcess, prefix: str) -> float:
    text = urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


@pytest.fixture(scope="module")
def rotel_binary():
    try:
        return agent()
    except RotelUnavailable as exc:
        pytest.skip(str(exc))


def _span_rows(daemon: DaemonProcess) -> int:
    return int(daemon.query_json("SELECT count(*) AS n FROM spans")[0]["n"])


def _rootless(endpoint: str, conversations: list[dict]) -> None:
    """Send ``conversations`` as children of a span that never comes (not a remote parent): their
    traces have no root, so assembly waits ``max_wait_s`` for it."""
    parent = trace.SpanContext(
        0x0DE1 << 64, 0x0DE1, is_remote=False, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED)
    )
    token = context.attach(trace.set_span_in_context(trace.NonRecordingSpan(parent)))
    try:
        emit_conversations(endpoint, conversations)
    finally:
        context.detach(token)


def test_spans_through_rotel_are_scored_and_a_429_is_retried(tmp_path, rotel_binary):
    # one trace at a time in assembly: while the first (rootless) waits for max_wait_s, assembly holds the
    # feed back, a second trace waits in the segment log, and with the log's bound at one byte a third is
    # refused with 429; max_wait_s is the window for that: long enough for two more exports through rotel on
    # a loaded machine (8 s was not, once, beside a full test run); the traces after it, with their roots,
    # complete after the short idle_s. The window cannot be held open by the test instead: while the feed is
    # behind, the daemon refuses every span, the one that would complete the first trace too
    daemon = DaemonProcess(
        tmp_path,
        plain_config(
            tmp_path,
            assembly={"idle_s": 0.3, "max_wait_s": 15.0, "max_traces": 1},
            segment_log={"max_lag_bytes": 1},
            scorers=[{"id": "non-empty", "prebuilt": "non_empty_response"}],
        ),
    ).start()
    grpc_port = _free_port()
    log = open(tmp_path / "rotel.log", "wb")
    rotel = subprocess.Popen(
        [
            str(rotel_binary),
            "start",
            "--otlp-grpc-endpoint",
            f"127.0.0.1:{grpc_port}",
            "--otlp-http-endpoint",
            f"127.0.0.1:{_free_port()}",
            "--pid-file",
            str(tmp_path / "rotel.pid"),
            "--log-file",
            str(tmp_path / "rotel-agent.log"),
            "--exporter",
            "otlp",
            "--otlp-exporter-endpoint",
            daemon.http_url,
            "--otlp-exporter-protocol",
            "http",
            "--otlp-exporter-retry-initial-backoff",
            "200ms",
            "--otlp-exporter-retry-max-backoff",
            "1s",
            "--otlp-exporter-retry-max-elapsed-time",
            "120s",
            "--batch-timeout",
            "50ms",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:

        def listening() -> bool:
            if rotel.poll() is not None:
                raise RuntimeError(f"rotel exited: {(tmp_path / 'rotel.log').read_text(errors='replace')}")
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", grpc_port)) == 0

        wait_for(listening, 30, what="rotel listening")
        conversations = [
            {"id": f"hop-{i}", "agent": "support", "turns": [(f"q{i}", None, None, None, f"a{i}")]} for i in range(3)
        ]
        _rootless(f"127.0.0.1:{grpc_port}", conversations[:1])
        wait_for(  # /metrics, not a query: cheap enough to see it early on a loaded machine
            lambda: _metric(daemon, "tracescorer_assembly_buffered_traces") >= 1,
            30,
            interval_s=0.05,
            what="the first trace in assembly",
        )
        emit_conversations(f"127.0.0.1:{grpc_port}", conversations[1:2])  # acknowledged, held in the log
        wait_for(lambda: _metric(daemon, "tracescorer_feed_lag_bytes") > 0, 30, interval_s=0.05, what="the feed held")
        emit_conversations(f"127.0.0.1:{grpc_port}", conversations[2:])  # refused while the feed is behind
        wait_for(
            lambda: _metric(daemon, "tracescorer_receiver_backpressure_total") >= 1,
            30,
            interval_s=0.1,
            what="a 429 answered to rotel",
        )
        rows = wait_for(
            lambda: (lambda r: r if len(r) == 3 else None)(
                daemon.query_json("SELECT conversation_id, status, score FROM scores ORDER BY 1")
            ),
            120,
            interval_s=0.2,
            what="the three runs scored after rotel's retry",
        )
        assert rows == [
            {"conversation_id": "hop-0", "status": "ok", "score": 1.0},
            {"conversation_id": "hop-1", "status": "ok", "score": 1.0},
            {"conversation_id": "hop-2", "status": "ok", "score": 1.0},
        ]
        # nothing lost, nothing twice (the span rows come at the span-rows feed's pace)
        spans = wait_for(lambda: n if (n := _span_rows(daemon)) >= 6 else None, 30, interval_s=0.2, what="span rows")
        assert spans == 6
    finally:
        rotel.terminate()
        try:
            rotel.wait(10)
        except subprocess.TimeoutExpired:
            rotel.kill()
        log.close()
        assert daemon.stop() == 0
