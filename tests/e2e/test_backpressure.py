"""Keeping up or pushing back (issue 9): a pipeline stage held full gives retryable refusals at
both receivers and loses nothing acknowledged; traces beyond the in-memory window wait in the span
log and are assembled from there, after the stage drains and after a restart."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import grpc
from support import gated
from support.daemon import DaemonProcess, config_dict, running_app, settings_for, settled, wait_for_async
from support.db import scalar
from support.gate import LogGate
from support.payloads import trace_request

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _agent_trace(i: int, spans: int = 4) -> list[dict]:
    """An agent span with its model calls: one run per trace."""
    trace = f"{i:032x}"
    root = f"{i:08x}00000000"
    msgs = json.dumps([{"role": "user", "parts": [{"type": "text", "content": f"question {i}"}]}])
    out = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": f"answer {i}"}]}])
    return [
        {
            "trace_id": trace,
            "span_id": root,
            "name": "invoke_agent bot",
            "attributes": {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "bot",
                "gen_ai.input.messages": msgs,
                "gen_ai.output.messages": out,
            },
        }
    ] + [
        {
            "trace_id": trace,
            "span_id": f"{i:08x}{j:08x}",
            "parent_span_id": root,
            "name": "chat m",
            "attributes": {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
        }
        for j in range(1, spans)
    ]


def _post_http(port: int, spans: list[dict]) -> int:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/traces",
        data=trace_request(spans).SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        assert exc.headers["Retry-After"], "a refusal must say when to retry"
        return exc.code


def _post_grpc(port: int, spans: list[dict]) -> grpc.StatusCode:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            channel.unary_unary(EXPORT)(trace_request(spans).SerializeToString(), timeout=30)
            return grpc.StatusCode.OK
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:  # OTLP: retryable only with RetryInfo
                assert any(k == "google.rpc.retryinfo-bin" for k, _ in exc.trailing_metadata() or ())
            return exc.code()


async def _taken(app, transport: str, spans: list[dict]) -> bool:
    """Whether the request was taken (a refusal must be retryable: the helpers check)."""
    if transport == "http":
        return await asyncio.to_thread(_post_http, app.http_port, spans) == 200
    return await asyncio.to_thread(_post_grpc, app.grpc_port, spans) == grpc.StatusCode.OK


async def test_a_full_scoring_stage_pushes_back_at_both_receivers_and_loses_nothing(tmp_path):
    """A full scoring stage holds the segment log's feed back; what comes meanwhile waits in the log
    and, once the log is segment_log.max_lag_bytes ahead, both receivers refuse as retryable."""
    gated.GATE.clear()
    settings = settings_for(
        tmp_path,
        workers={"count": 0},  # the gated scorer waits on this process's event
        assembly={"idle_s": 0.2},
        scoring={"max_queue": 20, "workers": 1},
        scorers=[{"id": "gated", "python": "support.gated:scorer"}],
        segment_log={"max_lag_bytes": 20_000},
    )
    async with running_app(settings) as app:
        acked, refused = [], {"http": 0, "grpc": 0}
        for i in range(1, 400):
            transport = "http" if i % 2 else "grpc"
            if await _taken(app, transport, _agent_trace(i)):
                acked.append(i)
            elif "segment log's feed" in (app.not_ready_reason() or ""):
                refused[transport] += 1
            if refused["http"] and refused["grpc"]:
                break
            await asyncio.sleep(0.01 if len(acked) < 10 else 0.05)
        assert refused["http"] and refused["grpc"], (acked, refused)
        assert app.pipeline.feed.held_by is not None and "scoring" in app.pipeline.feed.held_by
        assert 'tracescorer_receiver_backpressure_total{bound="log"}' in app.metrics.render().decode()
        gated.GATE.set()
        # every acknowledged trace is assembled and scored once the stage drains; none was lost
        await wait_for_async(lambda: _scored(app, len(acked)), 60, interval_s=0.2, what="every acked trace scored")
        assert (
            await scalar(app.stores.queries, "SELECT count(*) FROM scoring_decisions WHERE decision <> 'scored'") == 0
        )
        await wait_for_async(lambda: app.not_ready_reason() is None, 20, what="ready again")


async def test_requests_in_flight_are_bounded_at_both_receivers_before_their_bodies_are_read(tmp_path):
    # span rows on: the acknowledged traces are looked up as rows
    settings = settings_for(
        tmp_path, store={"spans": "agent"}, receiver={"max_concurrent_requests": 2, "retry_after_s": 1}
    )
    async with running_app(settings) as app, LogGate(app.segment_log) as gate:
        # one request at each receiver waits for the held log writer: that is every place there is
        held = [
            asyncio.create_task(asyncio.to_thread(_post_http, app.http_port, _agent_trace(1))),
            asyncio.create_task(asyncio.to_thread(_post_grpc, app.grpc_port, _agent_trace(2))),
        ]
        await wait_for_async(lambda: app.ingestor.requests_in_flight == 2, 20, what="two requests in flight")
        # more are refused as retryable at once (the helpers assert Retry-After / RetryInfo), whatever their size
        big = _agent_trace(3, spans=40)
        assert await asyncio.to_thread(_post_http, app.http_port, big) == 429
        assert await asyncio.to_thread(_post_grpc, app.grpc_port, big) == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert 'tracescorer_receiver_backpressure_total{bound="requests"} 2.0' in app.metrics.render().decode()
        assert app.ingestor.requests_in_flight == 2 and app.ingestor.inflight_bytes > 0
        gate.open()
        assert await asyncio.gather(*held) == [200, grpc.StatusCode.OK]
        # every place is given back (refused ones too), and nothing acknowledged is missing
        await wait_for_async(lambda: app.ingestor.requests_in_flight == 0, 20, what="no request in flight")
        assert app.ingestor.inflight_bytes == 0
        assert await asyncio.to_thread(_post_grpc, app.grpc_port, _agent_trace(4)) == grpc.StatusCode.OK
        assert await asyncio.to_thread(_post_http, app.http_port, _agent_trace(5)) == 200
        assert await scalar(await settled(app), "SELECT count(DISTINCT trace_id) FROM spans") == 4


async def test_grpc_calls_are_taken_and_refused_while_the_daemons_loop_is_busy(tmp_path):
    """grpc runs on a loop of its own: with the daemon's loop held, a call is still taken (and
    waits for the loop), and one beyond receiver.max_concurrent_requests is refused at once as
    retryable instead of waiting unseen inside grpc."""
    # span rows on: the acknowledged trace is looked up as rows
    settings = settings_for(tmp_path, store={"spans": "agent"}, receiver={"max_concurrent_requests": 1})
    async with running_app(settings) as app:
        held, seen = threading.Event(), {}

        def client() -> None:
            with ThreadPoolExecutor(1) as pool:
                first = pool.submit(_post_grpc, app.grpc_port, _agent_trace(1))
                deadline = time.monotonic() + 20
                while app.grpc.calls_waiting < 1 and time.monotonic() < deadline:
                    time.sleep(0.01)
                seen["taken"] = app.grpc.calls_waiting
                seen["second"] = _post_grpc(app.grpc_port, _agent_trace(2))
                seen["loop_still_held"] = not held.is_set()
                held.set()
                seen["first"] = first.result(timeout=30)

        thread = threading.Thread(target=client)
        thread.start()
        held.wait(30)  # holds the daemon's loop (this test runs on it) until the client is done
        held.set()
        await asyncio.to_thread(thread.join, 30)
        assert seen == {
            "taken": 1,
            "second": grpc.StatusCode.RESOURCE_EXHAUSTED,
            "loop_still_held": True,
            "first": grpc.StatusCode.OK,
        }
        assert await scalar(await settled(app), "SELECT count(DISTINCT trace_id) FROM spans") == 1


async def _scored(app, n: int) -> bool:
    return await scalar(app.stores.queries, "SELECT count(*) FROM scores WHERE status = 'ok'") == n


async def test_far_more_than_the_window_is_assembled_from_the_span_log(tmp_path):
    # a window of 40 spans, 600 traces of 4: almost every trace waits on disk, not in memory
    # the buffer in this process (the test reads its stats)
    settings = settings_for(tmp_path, workers={"count": 0}, assembly={"idle_s": 0.5, "max_spans": 40})
    async with running_app(settings) as app:
        for start in range(0, 600, 50):
            spans = [s for i in range(start + 1, start + 51) for s in _agent_trace(i)]
            assert await asyncio.to_thread(_post_http, app.http_port, spans) == 200
            assert app.pipeline.assembly.buffer.stats.items_buffered <= 40
        await wait_for_async(lambda: _count(app, "runs", 600), 60, interval_s=0.2, what="600 runs")
        assert app.pipeline.assembly.buffer.stats.traces_spilled > 500
        assert await scalar(app.stores.queries, "SELECT count(*) FROM assembled_traces WHERE span_count = 4") == 600
        assert await scalar(app.stores.queries, "SELECT count(DISTINCT input_messages) FROM runs") == 600


async def _count(app, table: str, n: int) -> bool:
    return await scalar(app.stores.queries, f"SELECT count(*) FROM {table}") == n


def test_the_on_disk_backlog_is_assembled_after_a_restart(tmp_path):
    slow = config_dict(tmp_path, assembly={"idle_s": 3600, "max_spans": 40})
    first = DaemonProcess(tmp_path, slow).start()
    for start in range(0, 300, 50):
        assert (
            _post_http(
                int(first.http_url.rsplit(":", 1)[1]),
                [s for i in range(start + 1, start + 51) for s in _agent_trace(i)],
            )
            == 200
        )
    assert first.stop() == 0, first.log()
    assert first.query_json("SELECT count(*) AS n FROM runs") == [{"n": 0}]
    second = DaemonProcess(tmp_path, config_dict(tmp_path, assembly={"max_spans": 40})).start()
    try:
        from support.daemon import wait_for

        wait_for(
            lambda: second.query_json("SELECT count(*) AS n FROM runs") == [{"n": 300}],
            60,
            interval_s=0.3,
            what="300 runs recovered from the span log",
        )
        rows = second.query_json("SELECT reason, count(*) AS n FROM assembled_traces GROUP BY ALL")
        assert rows == [{"reason": "recovered", "n": 300}]
    finally:
        assert second.stop() == 0, second.log()
