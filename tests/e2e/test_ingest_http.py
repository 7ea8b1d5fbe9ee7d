"""OTLP/HTTP protocol behaviour: encodings, partial success, every error status, auth."""

from __future__ import annotations

import gzip
import json

import aiohttp
import pytest
import pytest_asyncio
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from support.daemon import plain_settings, running_app, settled
from support.db import fetch, scalar
from support.payloads import JSON_TRACE_ATTRS, SPAN_ID, TRACE_ID, json_trace_body, logs_request, trace_request

from tracescorer.store.jsonvalue import loads

PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}


async def _count(app, table="spans"):
    return await scalar(await settled(app), f"SELECT count(*) FROM {table}")


async def _post(app, path, body, headers):
    async with aiohttp.ClientSession() as s:
        async with s.post(f"http://127.0.0.1:{app.http_port}{path}", data=body, headers=headers) as r:
            return r.status, r.headers, await r.read()


async def test_json_mapping_is_decoded_losslessly(tmp_path):
    async with running_app(plain_settings(tmp_path)) as app:
        status, headers, body = await _post(app, "/v1/traces", json_trace_body(), JS)
        assert status == 200 and headers["Content-Type"].startswith("application/json")
        assert json.loads(body) == {}
        (row,) = await fetch(
            await settled(app),
            "SELECT trace_id, span_id, parent_span_id, kind, start_time_unix_nano, status_code, attributes, service_name, scope_version, events FROM spans",
        )
    assert row[:6] == (TRACE_ID, SPAN_ID, None, "client", 1544712660000000001, "error")
    assert loads(row[6]) == JSON_TRACE_ATTRS
    assert (row[7], row[8]) == ("json-svc", "2.0")
    assert loads(row[9])[0]["time_unix_nano"] == 1544712660500000000


async def test_gzip_protobuf_and_json(tmp_path):
    spans = [{"trace_id": TRACE_ID, "span_id": SPAN_ID, "attributes": {"kv": {"a": [1, {"b": b"x"}]}}}]
    async with running_app(plain_settings(tmp_path)) as app:
        status, _, body = await _post(
            app,
            "/v1/traces",
            gzip.compress(trace_request(spans).SerializeToString()),
            {**PB, "Content-Encoding": "gzip"},
        )
        assert status == 200 and body == b""  # empty ExportTraceServiceResponse
        status, _, _ = await _post(
            app, "/v1/traces", gzip.compress(json_trace_body()), {**JS, "Content-Encoding": "gzip"}
        )
        assert status == 200
        attrs = await scalar(await settled(app), "SELECT attributes FROM spans WHERE name = 'span'")
        assert loads(attrs) == {"kv": {"a": [1, {"b": b"x"}]}}
        assert await _count(app) == 2


async def test_partial_success_reports_rejected_spans(tmp_path):
    good = {"trace_id": TRACE_ID, "span_id": SPAN_ID, "name": "good"}
    bad_len = {"trace_id": b"\x01" * 15, "span_id": SPAN_ID, "name": "short-trace-id"}
    missing = {"trace_id": TRACE_ID, "span_id": b"", "name": "no-span-id"}
    async with running_app(plain_settings(tmp_path)) as app:
        status, _, body = await _post(
            app, "/v1/traces", trace_request([good, bad_len, missing]).SerializeToString(), PB
        )
        assert status == 200
        resp = ExportTraceServiceResponse.FromString(body)
        assert resp.partial_success.rejected_spans == 2
        assert "trace_id must be 16 bytes" in resp.partial_success.error_message
        assert "missing span_id" in resp.partial_success.error_message
        assert await _count(app) == 1

        js = json.loads(json_trace_body())
        js["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "abc"
        status, _, body = await _post(app, "/v1/traces", json.dumps(js).encode(), JS)
        assert status == 200
        assert json.loads(body)["partialSuccess"]["rejectedSpans"] == "1"

        logs = logs_request([{"body": "ok"}, {"body": "bad", "trace_id": b"\x01\x02"}])
        status, _, body = await _post(app, "/v1/logs", logs.SerializeToString(), PB)
        assert status == 200
        assert ExportLogsServiceResponse.FromString(body).partial_success.rejected_log_records == 1
        assert await _count(app, "log_records") == 1


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def serving(tmp_path_factory):
    """One daemon for the tests that only send and read the answers (nothing they count)."""
    async with running_app(plain_settings(tmp_path_factory.mktemp("serving"))) as app:
        yield app


@pytest.mark.parametrize(
    "body,headers,expected",
    [
        (b"\x0a\xff\xff\xff", PB, 400),  # truncated protobuf
        (b"not json", JS, 400),
        (b'{"resourceSpans": 5}', JS, 400),  # wrong JSON types
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 7}]}]}]}', JS, 200),  # bad id: partial
        (b"\x1f\x8b garbage", {**PB, "Content-Encoding": "gzip"}, 400),
        (b"x", {"Content-Type": "text/plain"}, 415),
        (b"x", {**PB, "Content-Encoding": "br"}, 415),
    ],
)
@pytest.mark.asyncio(loop_scope="module")
async def test_bad_requests_get_clear_4xx(serving, body, headers, expected):
    app = serving
    status, _resp_headers, resp = await _post(app, "/v1/traces", body, headers)
    assert status == expected
    if expected == 400 and headers["Content-Type"] == "application/x-protobuf":
        st = status_pb2.Status.FromString(resp)
        assert st.code == 3 and st.message  # INVALID_ARGUMENT with a message
    if expected == 400 and headers["Content-Type"] == "application/json":
        assert json.loads(resp)["message"]
    # the daemon keeps serving
    status, _, _ = await _post(
        app, "/v1/traces", trace_request([{"trace_id": TRACE_ID, "span_id": SPAN_ID}]).SerializeToString(), PB
    )
    assert status == 200


@pytest.mark.asyncio(loop_scope="module")
async def test_invalid_utf8_in_protobuf_string_is_refused(serving):
    trace_id = "00000000000000000000000000000bad"  # this test's own on the shared daemon
    raw = bytearray(trace_request([{"trace_id": trace_id, "span_id": SPAN_ID, "name": "AAAA"}]).SerializeToString())
    raw[raw.index(b"AAAA")] = 0xFF
    status, _, _ = await _post(serving, "/v1/traces", bytes(raw), PB)
    assert status == 400
    assert await scalar(await settled(serving), "SELECT count(*) FROM spans WHERE trace_id = ?", trace_id) == 0


async def test_size_limit_method_and_path(tmp_path):
    settings = plain_settings(tmp_path, receiver={"max_message_bytes": 2048})
    big = trace_request(
        [{"trace_id": TRACE_ID, "span_id": SPAN_ID, "attributes": {"x": "y" * 5000}}]
    ).SerializeToString()
    async with running_app(settings) as app:
        assert (await _post(app, "/v1/traces", big, PB))[0] == 413
        assert (await _post(app, "/v1/traces", gzip.compress(big), {**PB, "Content-Encoding": "gzip"}))[0] == 413
        async with aiohttp.ClientSession() as s:
            async with s.get(f"http://127.0.0.1:{app.http_port}/v1/traces") as r:
                assert r.status == 405
            async with s.post(f"http://127.0.0.1:{app.http_port}/v1/metrics", data=b"", headers=PB) as r:
                assert r.status == 404


@pytest.mark.asyncio(loop_scope="module")
async def test_huge_attribute_value_within_limit_is_stored(serving):
    value = "z" * 3_000_000
    trace_id = "00000000000000000000000000000b16"  # this test's own on the shared daemon
    req = trace_request([{"trace_id": trace_id, "span_id": SPAN_ID, "attributes": {"gen_ai.input.messages": value}}])
    assert (await _post(serving, "/v1/traces", req.SerializeToString(), PB))[0] == 200
    stored = await scalar(await settled(serving), "SELECT attributes FROM spans WHERE trace_id = ?", trace_id)
    assert loads(stored)["gen_ai.input.messages"] == value


async def test_bearer_token_auth(tmp_path):
    body = trace_request([{"trace_id": TRACE_ID, "span_id": SPAN_ID}]).SerializeToString()
    async with running_app(plain_settings(tmp_path, receiver={"auth_token": "s3cret"})) as app:
        assert (await _post(app, "/v1/traces", body, PB))[0] == 401
        assert (await _post(app, "/v1/traces", body, {**PB, "Authorization": "Bearer wrong"}))[0] == 401
        assert (await _post(app, "/v1/traces", body, {**PB, "Authorization": "Bearer s3cret"}))[0] == 200
        assert await _count(app) == 1


async def test_health_ready_metrics(tmp_path):
    body = trace_request(
        [{"trace_id": TRACE_ID, "span_id": SPAN_ID}, {"trace_id": b"", "span_id": SPAN_ID}]
    ).SerializeToString()
    async with running_app(plain_settings(tmp_path)) as app:
        await _post(app, "/v1/traces", body, PB)
        async with aiohttp.ClientSession() as s:
            base = f"http://127.0.0.1:{app.http_port}"
            async with s.get(base + "/healthz") as r:
                assert r.status == 200
            async with s.get(base + "/readyz") as r:
                assert r.status == 200 and (await r.json())["ready"] is True
            async with s.get(base + "/metrics") as r:
                text = await r.text()
    assert 'tracescorer_receiver_items_accepted_total{signal="traces"} 1.0' in text
    assert 'tracescorer_receiver_items_rejected_total{reason="invalid",signal="traces"} 1.0' in text
    assert 'tracescorer_receiver_requests_total{outcome="partial",signal="traces",transport="http"} 1.0' in text
    assert "tracescorer_store_commit_seconds_bucket" in text
    assert "tracescorer_store_queue_items" in text and "tracescorer_store_db_size_bytes" in text
