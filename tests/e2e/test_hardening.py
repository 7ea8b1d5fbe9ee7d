"""Production hardening through the real daemon: bad data is the client's fault (per item, never
retryable), deep nesting is refused alike on both encodings, readiness tells the truth when the
disk is full, SIGTERM exits 0 after a burst and during the replay at start, the event loop never stalls on
the first judge call."""

from __future__ import annotations

import concurrent.futures
import json
import shutil
import signal
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
from fakes.fake_openai import FakeOpenAI, Reply
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from support.daemon import DaemonProcess, config_dict, plain_config, wait_for
from support.disk import small_disk
from support.otlp import agent_trace, span_exporter, tracer
from support.payloads import trace_request

from tracescorer.receiver.decode import MAX_VALUE_DEPTH

TRACE = "5eed" * 8


def _post(url: str, body: bytes, content_type: str = "application/json") -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def _json_span(span_id: str, name: str, **fields: Any) -> dict[str, Any]:
    span = {
        "traceId": TRACE,
        "spanId": span_id,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
    }
    span.update(fields)
    return span


def _json_traces(spans: list[dict[str, Any]]) -> bytes:
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "hardening"}}]},
                    "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}],
                }
            ]
        }
    ).encode()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hardening")
    d = DaemonProcess(tmp, plain_config(tmp, assembly={"idle_s": 0.3})).start()
    yield d
    assert d.stop() == 0, d.log()


def test_out_of_range_integers_are_rejected_per_item_and_good_spans_stored(daemon):
    spans = [
        _json_span("00000000000000a1", "good-1"),
        _json_span("00000000000000a2", "negative-start", startTimeUnixNano="-5"),
        _json_span("00000000000000a3", "huge-end", endTimeUnixNano=str(2**64)),
        _json_span("00000000000000a4", "bad-flags", flags=-1),
        _json_span("00000000000000a5", "huge-dropped", droppedAttributesCount=2**65),
        _json_span("00000000000000a6", "huge-int", attributes=[{"key": "n", "value": {"intValue": str(2**63)}}]),
        _json_span("00000000000000a7", "good-2"),
    ]
    status, _, body = _post(daemon.http_url + "/v1/traces", _json_traces(spans))
    assert status == 200, body  # never 503: the client's data, not the daemon's state
    reply = json.loads(body)
    assert reply["partialSuccess"]["rejectedSpans"] == "5"
    message = reply["partialSuccess"]["errorMessage"]
    for field in ("startTimeUnixNano", "endTimeUnixNano", "flags", "droppedAttributesCount"):
        assert field in message, message
    # one request: its span rows come in one transaction, at the span-rows feed's pace
    sql = f"SELECT name FROM spans WHERE trace_id = '{TRACE}' AND name LIKE 'good-%'"
    stored = wait_for(lambda: daemon.query_json(sql), 30, what="the good spans' rows")
    assert {r["name"] for r in stored} == {"good-1", "good-2"}

    logs = {
        "resourceLogs": [
            {
                "resource": {},
                "scopeLogs": [
                    {
                        "scope": {},
                        "logRecords": [
                            {
                                "timeUnixNano": "1700000000000000000",
                                "severityNumber": 2**40,
                                "body": {"stringValue": "bad"},
                            },
                            {
                                "timeUnixNano": "1700000000000000000",
                                "severityNumber": 9,
                                "body": {"stringValue": "kept"},
                            },
                        ],
                    }
                ],
            }
        ]
    }
    status, _, body = _post(daemon.http_url + "/v1/logs", json.dumps(logs).encode())
    assert status == 200 and json.loads(body)["partialSuccess"]["rejectedLogRecords"] == "1"
    assert "severityNumber" in json.loads(body)["partialSuccess"]["errorMessage"]
    kept = wait_for(lambda: daemon.query_json("SELECT body FROM log_records"), 30, what="the kept log record's row")
    assert kept == [{"body": '"kept"'}]


def test_a_run_ending_at_the_last_representable_nanosecond_is_stored_beside_the_others(daemon):
    """OTLP times are fixed64: a client may send up to 2^64 - 1. Such a span was stored, but its
    run was refused (Arrow's int64), and assembly retried the whole chunk for good: no run of any
    trace in it was ever stored or scored."""
    with tracer(span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint), service="far-future") as t:
        for name, end in (("ordinary", None), ("far-future", 2**64 - 1), ("ordinary-too", None)):
            span = t.start_span(
                f"invoke_agent {name}", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
            )
            span.end(end_time=end)
    sql = "SELECT agent_name, ended_at_unix_nano FROM runs WHERE service_name = 'far-future' ORDER BY agent_name"
    wait_for(lambda: len(daemon.query_json(sql)) == 3, timeout_s=60, what="the three runs stored")
    runs = daemon.query_json(sql)
    assert [r["agent_name"] for r in runs] == ["far-future", "ordinary", "ordinary-too"]
    assert runs[0]["ended_at_unix_nano"] == 2**64 - 1
    assert "refused the runs" not in daemon.log() and "storing the runs" not in daemon.log()


def _nested_json(depth: int) -> str:
    # as text: the encoder of the test itself would hit Python's recursion limit
    return '{"arrayValue":{"values":[' * depth + '{"stringValue":"leaf"}' + "]}}" * depth


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _nested_pb(depth: int) -> bytes:
    """An AnyValue nested ``depth`` arrays deep, encoded by hand (protobuf's own encoder refuses
    to build what a hostile client can still send)."""
    value = AnyValue(string_value="leaf").SerializeToString()
    for _ in range(depth):
        array = b"\x0a" + _varint(len(value)) + value  # ArrayValue.values (field 1)
        value = b"\x2a" + _varint(len(array)) + array  # AnyValue.array_value (field 5)
    return value


@pytest.mark.parametrize("depth", [MAX_VALUE_DEPTH, MAX_VALUE_DEPTH + 1, 1200])
def test_deep_nesting_is_refused_at_the_same_depth_for_json_and_protobuf(daemon, depth):
    accepted = depth <= MAX_VALUE_DEPTH
    span_json = _json_span(
        f"{0xB0 + min(depth, 0x4F):016x}", f"deep-{depth}", attributes=[{"key": "deep", "value": "@"}]
    )
    text = _json_traces([span_json]).replace(b'"@"', _nested_json(depth).encode())
    status, _, body = _post(daemon.http_url + "/v1/traces", text)
    assert status == (200 if accepted else 400), body
    if not accepted:
        assert b"nested" in body or b"recursion" in body.lower() or b"depth" in body.lower()

    request = trace_request(
        [
            {
                "trace_id": TRACE,
                "span_id": f"{0xC0 + min(depth, 0x3F):016x}",
                "name": f"pb-{depth}",
                "attributes": {"deep": "@@@@"},
            }
        ]
    )
    marker = KeyValue(key="deep", value=AnyValue(string_value="@@@@")).SerializeToString()
    deep = b"\x0a\x04deep\x12" + _varint(len(_nested_pb(depth))) + _nested_pb(depth)  # KeyValue{key, value}
    data = _reframe(request.SerializeToString(), marker, deep)
    status, _, body = _post(daemon.http_url + "/v1/traces", data, "application/x-protobuf")
    assert status == (200 if accepted else 400)
    with grpc.insecure_channel(daemon.grpc_endpoint) as channel:
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=None,
            response_deserializer=ExportTraceServiceResponse.FromString,
        )
        if accepted:
            export(data, timeout=30)
        else:
            with pytest.raises(grpc.RpcError) as refused:
                export(data, timeout=30)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def _reframe(data: bytes, old: bytes, new: bytes) -> bytes:
    """Replace one length-delimited submessage ``old`` inside the serialized request by ``new``,
    fixing the lengths of the messages around it (request > ResourceSpans > ScopeSpans > Span)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req = ExportTraceServiceRequest.FromString(data)
    span = req.resource_spans[0].scope_spans[0].spans[0]
    span_bytes = span.SerializeToString().replace(b"\x4a" + _varint(len(old)) + old, b"\x4a" + _varint(len(new)) + new)
    scope = req.resource_spans[0].scope_spans[0]
    scope_head = scope.scope.SerializeToString()
    scope_bytes = b"\x0a" + _varint(len(scope_head)) + scope_head + b"\x12" + _varint(len(span_bytes)) + span_bytes
    rs = req.resource_spans[0]
    res = rs.resource.SerializeToString()
    rs_bytes = b"\x0a" + _varint(len(res)) + res + b"\x12" + _varint(len(scope_bytes)) + scope_bytes
    return b"\x0a" + _varint(len(rs_bytes)) + rs_bytes


def test_readyz_tells_the_truth_when_the_disk_is_full_and_recovers(tmp_path):
    with small_disk(tmp_path, "16m") as disk:
        cfg = plain_config(
            tmp_path,
            store={"path": str(disk / "ts.duckdb"), "checkpoint_threshold": "2MB"},
            segment_log={"min_free_bytes": 1 << 20},
        )
        d = DaemonProcess(tmp_path, cfg).start()
        try:
            ok = trace_request([{"trace_id": TRACE, "span_id": "00000000000000f1"}]).SerializeToString()
            assert _post(d.http_url + "/v1/traces", ok, "application/x-protobuf")[0] == 200
            filler = disk / "filler"
            with open(filler, "wb") as f:
                f.write(b"\0" * max(0, shutil.disk_usage(disk).free - 64 * 1024))
            big = trace_request(
                [
                    {"trace_id": TRACE, "span_id": f"{0xF100 + i:016x}", "attributes": {"x": "y" * 2000}}
                    for i in range(200)
                ]
            ).SerializeToString()
            status, headers, _ = _post(d.http_url + "/v1/traces", big, "application/x-protobuf")
            assert status == 503 and headers["Retry-After"]  # retryable: nothing was stored
            status, _, body = _post_get(d.http_url + "/readyz")
            assert status == 503 and "the disk is nearly full" in json.loads(body)["reason"]
            assert "tracescorer_ready 0.0" in _get(d.http_url + "/metrics")
            filler.unlink()
            wait_for(
                lambda: _post(d.http_url + "/v1/traces", big, "application/x-protobuf")[0] == 200,
                20,
                interval_s=0.5,
                what="writes to work again once space is free",
            )
            wait_for(lambda: _post_get(d.http_url + "/readyz")[0] == 200, 20, what="ready again")
        finally:
            assert d.stop() == 0, d.log()


def _post_get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def _get(url: str) -> str:
    return _post_get(url)[2].decode()


def test_score_rows_no_store_can_hold_do_not_stop_scoring(tmp_path):
    """A judge reply with a lone surrogate (a model splitting an emoji's escape) and a code step
    returning an integer past 64 bits: before, the store refused the batch holding them and the
    writer retried it for good (no score of the daemon was stored again). Now the judge's reason
    keeps U+FFFD, the step's row is stored as an error row saying why, and scoring goes on.

    And the event loop does not stall on the first judge call (litellm's import, its first
    request): no tick of the loop came a second or more late."""
    with FakeOpenAI() as fake:
        fake.script("Criterion:", Reply.json({"satisfied": True, "reasoning": "fine"}))
        fake.script("HUGE", Reply.json({"satisfied": True, "reasoning": "broken emoji \ud83d here"}))
        cfg = plain_config(
            tmp_path,
            assembly={"idle_s": 0.3},
            judge={"model": "openai/gpt-4o-mini", "api_base": fake.base_url, "api_key": "k", "timeout_s": 30},
            scorers=[
                {
                    "id": "run-judge",
                    "prebuilt": "multi_turn_judge",
                    "scope": "run",
                    "options": {"criterion": "answered"},
                },
                {"id": "oversized", "python": "support.oversized:scorer"},
                {"id": "non-empty", "prebuilt": "non_empty_response"},
            ],
        )
        d = DaemonProcess(tmp_path, cfg).start()
        try:
            with tracer(span_exporter("grpc", grpc_endpoint=d.grpc_endpoint)) as t:
                for answer in ("fine 1", "HUGE answer", "fine 2"):
                    agent_trace(t, answer=answer)
            wait_for(
                lambda: d.query_json("SELECT count(*) AS n FROM scores") == [{"n": 9}],
                60,
                interval_s=0.25,
                what="9 score rows",
            )
            with tracer(span_exporter("grpc", grpc_endpoint=d.grpc_endpoint)) as t:
                agent_trace(t, answer="later")  # scoring still stores rows afterwards
            wait_for(
                lambda: d.query_json("SELECT count(*) AS n FROM scores") == [{"n": 12}],
                60,
                interval_s=0.25,
                what="12 score rows",
            )
            rows = d.query_json(
                "SELECT s.scorer_id, s.status, s.reason, s.error, s.error_type, d.decision "
                "FROM scores s JOIN runs r USING (run_id) JOIN scoring_decisions d ON d.score_id = s.id "
                "WHERE r.output LIKE '%HUGE%' ORDER BY s.scorer_id"
            )
            metrics = urllib.request.urlopen(d.http_url + "/metrics", timeout=10).read().decode()
        finally:
            assert d.stop() == 0, d.log()
    by = {r["scorer_id"]: r for r in rows}
    assert by["run-judge"]["status"] == "ok" and "broken emoji \ufffd here" in by["run-judge"]["reason"]
    assert by["non-empty"]["status"] == "ok"
    refused = by["oversized"]
    assert (refused["status"], refused["error_type"], refused["decision"]) == ("error", "StoreRefused", "failed")
    assert "the store refused this score row" in refused["error"] and "64-bit" in refused["error"]
    assert "tracescorer_scoring_rows_refused_total 1.0" in metrics
    assert "storing scores failed" not in d.log()
    buckets = {
        float(line.split('le="')[1].split('"')[0]) if "+Inf" not in line else float("inf"): float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("tracescorer_event_loop_lag_seconds_bucket")
    }
    total = buckets[float("inf")]
    assert total > 0 and buckets[1.0] == total, buckets  # no tick of the loop came a second or more late


def _burst(daemon: DaemonProcess, requests: int, spans_per_request: int, prefix: int) -> list[str]:
    """Send requests concurrently; the span ids of those acknowledged."""

    def one(i: int) -> list[str]:
        ids = [f"{prefix:04x}{i:06x}{j:06x}" for j in range(spans_per_request)]
        body = trace_request(
            [
                {
                    "trace_id": f"{prefix:04x}{i:028x}",
                    "span_id": sid,
                    "attributes": {"gen_ai.operation.name": "chat", "m": "x" * 500},
                }
                for sid in ids
            ]
        )
        try:
            status = _post(daemon.http_url + "/v1/traces", body.SerializeToString(), "application/x-protobuf")[0]
        except OSError:
            return []
        return ids if status == 200 else []

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        return [sid for ids in pool.map(one, range(requests)) for sid in ids]


def test_sigterm_after_a_load_burst_and_during_the_replay_at_start_exits_0(tmp_path):
    """SIGTERM right after a load burst exits 0, every acknowledged span kept in the segment log;
    the next start, stopped by SIGTERM while its feed replays the log, exits 0 too, and the one
    after it still assembles every trace with every span."""
    slow = config_dict(tmp_path, assembly={"idle_s": 3600})
    first = DaemonProcess(tmp_path, slow).start()
    acked = _burst(first, 60, 100, 0x1)  # 60 traces of 100 spans that the stop leaves unassembled
    assert first.stop(signal.SIGTERM) == 0, first.log()
    assert not Path(first.db_path + ".serve.json").exists()
    assert len(acked) == 6000
    second = DaemonProcess(tmp_path, slow).start()
    assert second.stop(signal.SIGTERM) == 0, second.log()  # while its feed replays the log
    third = DaemonProcess(tmp_path, config_dict(tmp_path)).start()
    try:  # and the next start still assembles every one of them, whole
        wait_for(
            lambda: third.query_json("SELECT count(*) AS n FROM assembled_traces")[0]["n"] == len(acked) // 100,
            60,
            interval_s=0.5,
            what="every trace assembled after the interrupted replay",
        )
        whole = "SELECT count(*) AS n FROM assembled_traces WHERE span_count = 100"
        assert third.query_json(whole) == [{"n": len(acked) // 100}]
    finally:
        assert third.stop() == 0, third.log()
