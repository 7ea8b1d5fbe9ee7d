"""Connections at both receivers (issue 39): idle and slow-header connections are closed, the
keep-alive connections of real exporters keep working, and the HTTP cap makes room by closing
the longest-idle connection (or refuses when every one is busy, which readiness then says)."""

from __future__ import annotations

import asyncio
import re
import threading

import aiohttp
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from support.daemon import plain_settings, running_app, settled, wait_for_async
from support.db import scalar
from support.edges import Sender, close, closed_by_peer, connect, post_head, read_status, trickle


def _counter(app, name: str, **labels: str) -> float:
    """A sample of the app's metrics (0 when it has not been counted)."""
    text = app.metrics.render().decode()
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    found = re.search(rf"^{name}\{{{re.escape(want)}\}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


async def test_idle_and_slow_header_connections_are_closed_at_both_listeners(tmp_path):
    settings = plain_settings(tmp_path, receiver={"header_timeout_s": 0.5, "idle_timeout_s": 1})
    async with running_app(settings) as app:
        silent = await connect(app.http_port)
        trickling = await connect(app.http_port)
        stop = asyncio.Event()
        sender = asyncio.create_task(trickle(trickling, post_head(content_length=10), stop, interval_s=0.1))
        grpc_silent = await connect(app.grpc_port)  # never sends the HTTP/2 preface
        kept = await connect(app.http_port, post_head("/v1/traces", content_length=0))
        try:
            # the headers that never complete: closed a header timeout after the connection opened
            assert await closed_by_peer(silent, 15) and await closed_by_peer(trickling, 15)
            assert (
                _counter(app, "tracescorer_receiver_connections_closed_total", listener="http", reason="header_timeout")
                == 2
            )
            assert await closed_by_peer(grpc_silent, 30)  # grpc's handshake timeout
            # a kept-alive connection, its request answered, is closed only after the idle timeout
            assert (await read_status(kept, 10))[0] == 200
            assert await closed_by_peer(kept, 15)
            assert (
                _counter(app, "tracescorer_receiver_connections_closed_total", listener="http", reason="idle_timeout")
                == 1
            )
            await wait_for_async(lambda: app.http.guard.open == 0, 10, what="no connection left open")
        finally:
            stop.set()
            await sender
            close([silent, trickling, grpc_silent, kept])


async def test_exporters_keep_working_across_idle_timeouts(tmp_path):
    """The SDK exporters' connections are closed when idle (HTTP: closed; gRPC: GOAWAY), and the
    next export opens a new one: every export is acknowledged."""
    settings = plain_settings(tmp_path, receiver={"header_timeout_s": 0.5, "idle_timeout_s": 1})
    async with running_app(settings) as app:
        senders = [
            Sender("http", http_url=f"http://127.0.0.1:{app.http_port}"),
            Sender("grpc", grpc_endpoint=f"127.0.0.1:{app.grpc_port}"),
        ]
        for sender in senders:
            for _ in range(3):  # back to back: one kept-alive connection
                assert await asyncio.to_thread(sender.send)
        grpc_idle = _went_idle(senders[1])
        assert app.http.guard.open == 1
        await wait_for_async(lambda: app.http.guard.open == 0, 15, what="the idle HTTP connection closed")
        # gRPC: past max_connection_idle, the daemon's GOAWAY leaves the exporter's channel idle
        await wait_for_async(grpc_idle.is_set, 15, what="the idle gRPC connection closed")
        for sender in senders:
            assert await asyncio.to_thread(sender.send)
            sender.shutdown()
        assert await scalar(await settled(app), "SELECT count(*) FROM spans") == 8


def _went_idle(sender: Sender) -> threading.Event:
    """Set when the gRPC exporter's channel, connected now, goes idle (its connection closed)."""
    went_idle = threading.Event()
    channel = sender._exporter._channel  # the SDK's channel: grpc tells its state only there

    def seen(state: grpc.ChannelConnectivity) -> None:
        if state is grpc.ChannelConnectivity.IDLE:
            went_idle.set()

    channel.subscribe(seen)
    return went_idle


async def test_at_the_cap_the_longest_idle_connection_makes_room(tmp_path):
    settings = plain_settings(
        tmp_path,
        receiver={"max_connections": 3, "header_timeout_s": 30, "idle_timeout_s": 60, "body_timeout_s": 30},
    )
    async with running_app(settings) as app:
        idle = [await connect(app.http_port) for _ in range(3)]
        await wait_for_async(lambda: app.http.guard.open == 3, 10, what="three connections")
        sender = Sender("http", http_url=f"http://127.0.0.1:{app.http_port}")
        try:
            assert await asyncio.to_thread(sender.send)  # its connection closed the oldest idle one
            assert await closed_by_peer(idle[0], 10)
            assert (
                _counter(app, "tracescorer_receiver_connections_closed_total", listener="http", reason="evicted") == 1
            )
            assert app.http.guard.open == 3 and app.not_ready_reason() is None
        finally:
            sender.shutdown()
            close(idle)


async def test_readiness_says_which_bound_is_hit(tmp_path):
    """Requests, bytes in flight and connections: /readyz and the gRPC health service say so
    while the bound holds, and recover after."""
    settings = plain_settings(
        tmp_path,
        receiver={
            "max_concurrent_requests": 2,
            "max_inflight_bytes": 64 * 1024,
            "max_connections": 3,
            "body_timeout_s": 60,
            "header_timeout_s": 30,
            "idle_timeout_s": 60,
        },
    )
    async with running_app(settings) as app:
        base = f"http://127.0.0.1:{app.http_port}"
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}")
        health = health_pb2_grpc.HealthStub(channel)

        async def grpc_status() -> int:
            return (await health.Check(health_pb2.HealthCheckRequest(service=""))).status

        async def readyz() -> tuple[int, str]:
            async with aiohttp.ClientSession() as s, s.get(base + "/readyz") as r:
                return r.status, (await r.json()).get("reason", "")

        serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
        await wait_for_async(lambda: _is(grpc_status, serving), 10, what="SERVING")
        assert await readyz() == (200, "")

        async def bound_hit(conns, setting: str, ready_over_http: bool = True) -> None:
            await wait_for_async(lambda: setting in (app.not_ready_reason() or ""), 10, what=setting)
            if ready_over_http:
                status, reason = await readyz()
                assert status == 503 and setting in reason
            await wait_for_async(lambda: _is(grpc_status, not_serving), 10, what="NOT_SERVING")
            close(conns)
            await wait_for_async(lambda: app.not_ready_reason() is None, 20, what="ready again")
            await wait_for_async(lambda: _is(grpc_status, serving), 10, what="SERVING again")
            assert await readyz() == (200, "")

        # two requests that started their bodies: as many in flight as may be
        small = [await connect(app.http_port, post_head(content_length=100) + b"\0") for _ in range(2)]
        await bound_hit(small, "receiver.max_concurrent_requests")
        # a body that sent its first 64 KiB: the bytes in flight are at their bound
        big = await connect(app.http_port, post_head(content_length=200_000) + b"\0" * 65536)
        await bound_hit([big], "receiver.max_inflight_bytes")
        # three connections busy with requests (their bodies not started): a new one is refused
        busy = [await connect(app.http_port, post_head(content_length=100)) for _ in range(3)]
        await wait_for_async(lambda: app.http.guard.busy == 3, 10, what="every connection busy")
        refused = await connect(app.http_port)  # nothing idle to close for it: 503, Retry-After
        assert (await read_status(refused, 10))[0] == 503
        assert _counter(app, "tracescorer_receiver_connections_closed_total", listener="http", reason="refused") == 1
        await bound_hit([*busy, refused], "receiver.max_connections", ready_over_http=False)
        await channel.close()


async def _is(probe, want) -> bool:
    return await probe() == want
