"""OTLP/gRPC behaviour: errors, auth, TLS on both receivers, backpressure with real SDK retries."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import urllib.error
import urllib.request

import aiohttp
import grpc
import pytest
from opentelemetry.sdk.trace.export import SpanExportResult
from support.daemon import plain_settings, running_app, settled
from support.db import scalar
from support.gate import FeedGate
from support.otlp import agent_trace, span_exporter, tracer
from support.payloads import SPAN_ID, TRACE_ID, trace_request

TRACE_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


async def _count(app):
    return await scalar(await settled(app), "SELECT count(*) FROM spans")


def _raw_post(port: int, body: bytes) -> int:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/traces", data=body, headers={"Content-Type": "application/x-protobuf"}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _raw_export(port: int, body: bytes, metadata=()) -> tuple[grpc.StatusCode, bytes | None]:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(TRACE_METHOD, request_serializer=None, response_deserializer=None)
        try:
            return grpc.StatusCode.OK, call(body, metadata=metadata, timeout=10)
        except grpc.RpcError as exc:
            return exc.code(), None


async def test_grpc_invalid_argument_and_keeps_serving(tmp_path):
    async with running_app(plain_settings(tmp_path)) as app:
        code, _ = await asyncio.to_thread(_raw_export, app.grpc_port, b"\x0a\xff\xff\xff\xff")
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        good = trace_request([{"trace_id": TRACE_ID, "span_id": SPAN_ID}]).SerializeToString()
        code, resp = await asyncio.to_thread(_raw_export, app.grpc_port, good)
        assert code == grpc.StatusCode.OK and resp == b""
        assert await _count(app) == 1


async def test_grpc_oversized_message_is_refused(tmp_path):
    big = trace_request(
        [{"trace_id": TRACE_ID, "span_id": SPAN_ID, "attributes": {"x": "y" * 10_000}}]
    ).SerializeToString()
    async with running_app(plain_settings(tmp_path, receiver={"max_message_bytes": 4096})) as app:
        code, _ = await asyncio.to_thread(_raw_export, app.grpc_port, big)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert await _count(app) == 0


async def test_grpc_bearer_auth_with_sdk_exporter(tmp_path):
    async with running_app(plain_settings(tmp_path, receiver={"auth_token": "tok"})) as app:
        endpoint = f"127.0.0.1:{app.grpc_port}"
        code, _ = await asyncio.to_thread(
            _raw_export, app.grpc_port, trace_request([{"trace_id": TRACE_ID, "span_id": SPAN_ID}]).SerializeToString()
        )
        assert code == grpc.StatusCode.UNAUTHENTICATED
        exporter = span_exporter("grpc", grpc_endpoint=endpoint, headers={"authorization": "Bearer tok"})
        await asyncio.to_thread(lambda: agent_trace_with(exporter))
        assert await _count(app) == 4


def agent_trace_with(exporter) -> None:
    with tracer(exporter) as t:
        agent_trace(t)


@pytest.fixture(scope="module")
def tls_pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_tls_on_both_receivers(tmp_path, tls_pair, monkeypatch):
    cert, key = tls_pair
    # requests lets these variables override the exporter's own CA file
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    settings = plain_settings(tmp_path, receiver={"tls": {"cert_file": str(cert), "key_file": str(key)}})
    async with running_app(settings) as app:
        grpc_exp = span_exporter(
            "grpc",
            grpc_endpoint=f"localhost:{app.grpc_port}",
            insecure=False,
            credentials=grpc.ssl_channel_credentials(cert.read_bytes()),
        )
        http_exp = span_exporter("http", http_url=f"https://localhost:{app.http_port}", certificate_file=str(cert))
        for exp in (grpc_exp, http_exp):
            await asyncio.to_thread(agent_trace_with, exp)
        assert await _count(app) == 8
        # plain HTTP to the TLS port is not served
        async with aiohttp.ClientSession() as s:
            with pytest.raises(aiohttp.ClientError):
                await s.post(
                    f"http://127.0.0.1:{app.http_port}/v1/traces",
                    data=b"",
                    headers={"Content-Type": "application/x-protobuf"},
                )


@pytest.mark.parametrize("transport", ["grpc", "http"])
async def test_backpressure_then_sdk_retry_succeeds(tmp_path, transport):
    # the feed held back: once the log is segment_log.max_lag_bytes ahead of it, requests are refused
    settings = plain_settings(
        tmp_path,
        workers={"count": 0},  # the feed in this process: the test holds it back
        receiver={"retry_after_s": 1},
        segment_log={"max_lag_bytes": 1},
    )
    async with running_app(settings) as app, FeedGate(app.pipeline.feed) as gate:
        first = trace_request([{"trace_id": TRACE_ID, "span_id": "00000000000000b1"}]).SerializeToString()
        assert await asyncio.to_thread(_raw_post, app.http_port, first) == 200  # acknowledged: the feed is behind
        # A raw request is refused with the retryable status and a retry hint.
        body = trace_request(
            [{"trace_id": TRACE_ID, "span_id": SPAN_ID}, {"trace_id": TRACE_ID, "span_id": "00000000000000aa"}]
        ).SerializeToString()
        if transport == "grpc":
            code, _ = await asyncio.to_thread(_raw_export, app.grpc_port, body)
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        else:
            async with (
                aiohttp.ClientSession() as s,
                s.post(
                    f"http://127.0.0.1:{app.http_port}/v1/traces",
                    data=body,
                    headers={"Content-Type": "application/x-protobuf"},
                ) as r,
            ):
                assert r.status == 429 and r.headers["Retry-After"] == "1"
        assert 'tracescorer_receiver_backpressure_total{bound="log"}' in app.metrics.render().decode()
        # The SDK exporter honours the hint and succeeds once the feed goes on again.
        exporter = span_exporter(
            transport, grpc_endpoint=f"127.0.0.1:{app.grpc_port}", http_url=f"http://127.0.0.1:{app.http_port}"
        )
        threading.Timer(0.3, gate.open).start()
        from opentelemetry.sdk.trace import TracerProvider

        provider = TracerProvider()
        spans = []
        t = provider.get_tracer("bp")
        for i in range(3):
            with t.start_as_current_span(f"s{i}") as sp:
                spans.append(sp)
        result = await asyncio.to_thread(exporter.export, spans)
        assert result == SpanExportResult.SUCCESS
        assert await _count(app) == 4  # the first request and the SDK's three spans, nothing twice
