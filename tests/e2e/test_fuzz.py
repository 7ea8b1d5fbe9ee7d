"""Property-based: mutated OTLP payloads never crash the daemon or get a 5xx; it keeps serving."""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.daemon import DaemonProcess, config_dict
from support.payloads import SPAN_ID, TRACE_ID, json_trace_body, logs_request, trace_request

VALID_PB = trace_request(
    [
        {
            "trace_id": TRACE_ID,
            "span_id": SPAN_ID,
            "parent_span_id": "00000000000000ff",
            "attributes": {"s": "x", "n": 3, "kv": {"a": [1.5, True, b"\x00"]}},
        }
    ]
).SerializeToString()
VALID_LOGS = logs_request(
    [{"body": {"content": "hi"}, "event_name": "gen_ai.user.message", "trace_id": TRACE_ID, "span_id": SPAN_ID}]
).SerializeToString()
VALID_JSON = json_trace_body()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    # the receivers decode in the main process: no worker processes to start
    cfg = config_dict(tmp, receiver={"max_message_bytes": 65536}, workers={"count": 0})
    d = DaemonProcess(tmp, cfg).start()
    yield d
    assert d.stop() == 0, d.log()


def _post(url: str, body: bytes, ctype: str, encoding: str | None = None) -> int:
    headers = {"Content-Type": ctype}
    if encoding:
        headers["Content-Encoding"] = encoding
    req = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


@st.composite
def mutated(draw, base: bytes) -> bytes:
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[i] = draw(st.integers(0, 255))
        elif op == "cut":
            del data[i:]
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
        else:
            del data[i : i + draw(st.integers(1, 8))]
    return bytes(data)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)


def _assert_serving(daemon) -> None:
    assert _post(daemon.http_url + "/v1/traces", VALID_PB, "application/x-protobuf") == 200


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    payload=st.one_of(
        mutated(VALID_PB).map(lambda b: ("/v1/traces", b, "application/x-protobuf")),
        mutated(VALID_LOGS).map(lambda b: ("/v1/logs", b, "application/x-protobuf")),
        mutated(VALID_JSON).map(lambda b: ("/v1/traces", b, "application/json")),
        st.binary(max_size=512).map(lambda b: ("/v1/traces", b, "application/x-protobuf")),
        json_values.map(
            lambda v: (
                "/v1/traces",
                json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [v]}]}]}).encode(),
                "application/json",
            )
        ),
        json_values.map(lambda v: ("/v1/logs", json.dumps({"resourceLogs": v}).encode(), "application/json")),
    ),
    gz=st.booleans(),
)
def test_mutated_payloads_get_a_clear_answer(daemon, payload, gz):
    path, body, ctype = payload
    status = _post(daemon.http_url + path, gzip.compress(body) if gz else body, ctype, "gzip" if gz else None)
    assert status in (200, 400, 413), f"unexpected HTTP {status}"


def test_daemon_still_serves_after_fuzzing(daemon):
    _assert_serving(daemon)
    assert "Traceback" not in daemon.log()
