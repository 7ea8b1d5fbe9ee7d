"""The OTel Python SDK's own exporters (gRPC and HTTP) send spans and logs; rows read back exactly."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import pytest_asyncio
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)
from support.daemon import plain_settings, running_app, settled
from support.db import fetch
from support.otlp import log_exporter, span_exporter, tracer

from tracescorer.store.jsonvalue import loads

pytestmark = pytest.mark.asyncio(loop_scope="module")  # the module's daemon runs on the module's loop

ATTRS: dict[str, Any] = {
    "str": "héllo ✓",
    "bool": True,
    "int": -(2**62),
    "double": 1.0,
    "bytes": b"\x00\x01\xfe\xff",
    "str_array": ["a", "b"],
    "int_array": [1, 2, 3],
    "double_array": [0.5, 2.0],
    "bool_array": [True, False],
}


async def _rows(app: Any, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return await fetch(await settled(app), sql, *params)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def app(tmp_path_factory):
    """One daemon for the module: each test sends as a service of its own and reads only its rows."""
    async with running_app(plain_settings(tmp_path_factory.mktemp("sdk"))) as app:
        yield app


@pytest.mark.parametrize("transport", ["grpc", "http"])
async def test_sdk_spans_are_stored_exactly(app, transport):
    exporter = span_exporter(
        transport, grpc_endpoint=f"127.0.0.1:{app.grpc_port}", http_url=f"http://127.0.0.1:{app.http_port}"
    )
    sent: dict[str, Any] = {}

    def send() -> None:
        with tracer(exporter, service="sdk-" + transport) as t:
            with t.start_as_current_span("parent", kind=SpanKind.SERVER) as parent:
                ctx = parent.get_span_context()
                with t.start_as_current_span(
                    "child", kind=SpanKind.CLIENT, attributes=ATTRS, links=[Link(ctx, {"why": "test"})]
                ) as child:
                    child.add_event("gen_ai.user.message", {"content": "hi", "n": 2})
                    child.set_status(Status(StatusCode.ERROR, "boom"))
                    sent["child"] = child
                sent["parent"] = parent

    await asyncio.to_thread(send)
    parent, child = sent["parent"], sent["child"]
    rows = await _rows(
        app,
        "SELECT trace_id, span_id, parent_span_id, name, kind, start_time_unix_nano, end_time_unix_nano, "
        "status_code, status_message, service_name, scope_name, scope_version, attributes, events, links, "
        "resource_attributes FROM spans WHERE service_name = ? ORDER BY start_time_unix_nano",
        "sdk-" + transport,
    )
    assert len(rows) == 2
    p, c = rows
    ctx = child.get_span_context()
    assert c[0] == f"{ctx.trace_id:032x}" and c[1] == f"{ctx.span_id:016x}"
    assert c[2] == f"{parent.get_span_context().span_id:016x}" and p[2] is None
    assert (p[3], p[4], c[3], c[4]) == ("parent", "server", "child", "client")
    assert (c[5], c[6]) == (child.start_time, child.end_time)
    assert (c[7], c[8]) == ("error", "boom")
    assert c[9] == "sdk-" + transport and (c[10], c[11]) == ("tests.agent", "1.2.3")
    assert loads(c[12]) == ATTRS
    stored_double = loads(c[12])["double"]
    assert isinstance(stored_double, float)
    events = loads(c[13])
    assert events[0]["name"] == "gen_ai.user.message" and events[0]["attributes"] == {"content": "hi", "n": 2}
    links = loads(c[14])
    assert links[0]["span_id"] == p[1] and links[0]["attributes"] == {"why": "test"}
    assert loads(c[15])["service.name"] == "sdk-" + transport


@pytest.mark.parametrize("transport", ["grpc", "http"])
async def test_sdk_log_records_are_stored_exactly(app, transport):
    exporter = log_exporter(
        transport, grpc_endpoint=f"127.0.0.1:{app.grpc_port}", http_url=f"http://127.0.0.1:{app.http_port}"
    )

    def send() -> None:
        provider = LoggerProvider(resource=Resource.create({"service.name": "logs-" + transport}))
        provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))  # type: ignore[arg-type]
        logger = provider.get_logger("genai.events")
        span_ctx = SpanContext(
            0x9EFBF30A72647A496991366364B610E8, 0x8DE247D02AEE9395, is_remote=False, trace_flags=TraceFlags(1)
        )
        logger.emit(
            context=set_span_in_context(NonRecordingSpan(span_ctx)),
            event_name="gen_ai.choice",
            body={"index": 0, "message": {"role": "assistant", "content": "Sunny"}, "raw": b"\x01", "l": [1, "x"]},
            attributes={"gen_ai.system": "openai"},
            severity_number=SeverityNumber.INFO,
            timestamp=1_796_047_030_058_389_734,
        )
        provider.shutdown()

    await asyncio.to_thread(send)
    rows = await _rows(
        app,
        "SELECT event_name, body, attributes, trace_id, span_id, time_unix_nano, severity_number, service_name FROM log_records "
        "WHERE service_name = ?",
        "logs-" + transport,
    )
    assert len(rows) == 1
    name, body, attrs, trace_id, span_id, ts, sev, service = rows[0]
    assert name == "gen_ai.choice"
    assert loads(body) == {
        "index": 0,
        "message": {"role": "assistant", "content": "Sunny"},
        "raw": b"\x01",
        "l": [1, "x"],
    }
    assert loads(attrs) == {"gen_ai.system": "openai"}
    assert (trace_id, span_id) == ("9efbf30a72647a496991366364b610e8", "8de247d02aee9395")
    assert (ts, sev, service) == (1_796_047_030_058_389_734, SeverityNumber.INFO.value, "logs-" + transport)


async def test_the_langfuse_sdk_export_path_is_served_too(app):
    """Langfuse's SDK posts OTLP/HTTP to {host}/api/public/otel/v1/traces: pointed at the daemon's
    HTTP receiver as its host, it is stored like any other export."""
    exporter = span_exporter("http", http_url=f"http://127.0.0.1:{app.http_port}/api/public/otel")

    def send() -> None:
        with tracer(exporter, service="langfuse-app") as t, t.start_as_current_span("observed"):
            pass

    await asyncio.to_thread(send)
    assert await _rows(app, "SELECT name, service_name FROM spans WHERE service_name = ?", "langfuse-app") == [
        ("observed", "langfuse-app")
    ]
