"""grpc.health.v1.Health on the OTLP gRPC port (issue 38): what a Kubernetes gRPC probe asks."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from support.daemon import plain_settings, running_app, wait_for_async
from support.gate import WriterGate
from support.payloads import trace_request

from tracescorer.app import App

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
TRACES = "opentelemetry.proto.collector.trace.v1.TraceService"


async def _status(stub, service: str = "") -> int:
    return (await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)).status


async def test_serving_when_ready_not_serving_when_a_bound_is_hit(tmp_path):
    # the feed's writes in this process (the test holds the store's writer)
    settings = plain_settings(tmp_path, workers={"count": 0}, receiver={"max_queue_items": 10})
    async with running_app(settings) as app:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            await wait_for_async(lambda: _is(stub, "", SERVING), 10, what="SERVING")
            assert await _status(stub, TRACES) == SERVING
            with pytest.raises(grpc.aio.AioRpcError) as unknown:
                await _status(stub, "no.such.Service")
            assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
            async with WriterGate(app.stores.intake, tmp_path) as gate:  # the write queue fills: not ready
                body = trace_request([{"trace_id": f"{i + 1:032x}", "span_id": f"{i + 1:016x}"} for i in range(10)])
                export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
                held = asyncio.ensure_future(export(body.SerializeToString(), timeout=30))
                await wait_for_async(lambda: app.not_ready_reason() is not None, 10, what="the write queue full")
                await wait_for_async(lambda: _is(stub, "", NOT_SERVING), 10, what="NOT_SERVING")
                assert await _status(stub, TRACES) == NOT_SERVING
                gate.open()
                await held
            await wait_for_async(lambda: _is(stub, "", SERVING), 10, what="SERVING again")


async def test_watch_sees_not_serving_when_the_daemon_stops(tmp_path):
    app = App(plain_settings(tmp_path))
    await app.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            await wait_for_async(lambda: _is(stub, "", SERVING), 10, what="SERVING")
            watch = stub.Watch(health_pb2.HealthCheckRequest(service=""))
            assert (await watch.read()).status == SERVING
            stopping = asyncio.create_task(app.stop())
            seen = await asyncio.wait_for(watch.read(), 30)
            assert seen.status == NOT_SERVING
            await stopping
    finally:
        await app.stop()


async def _is(stub, service: str, want: int) -> bool:
    return await _status(stub, service) == want
