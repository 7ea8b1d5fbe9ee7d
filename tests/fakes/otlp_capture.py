"""An OTLP capture server for tests: what a collector or trace backend would receive.

Two real servers on ``127.0.0.1``, port 0, in background threads: OTLP/gRPC
(``TraceService/Export`` and ``LogsService/Export`` on a sync ``grpc.server``) and OTLP/HTTP
(``POST /v1/traces`` — also Langfuse's ``/api/public/otel/v1/traces`` — and ``/v1/logs``,
protobuf, optionally gzip/deflate, on aiohttp with its own event loop). Every request is decoded
with ``opentelemetry-proto`` and recorded; accepted spans are flattened into
:class:`CapturedSpan` records (log records into :class:`CapturedLogRecord`) with hex ids and
plain-Python attribute values. Failures are scripted with :meth:`OtlpCapture.fail_next` (gRPC
``UNAVAILABLE`` / HTTP 503 by default).

Example::

    with OtlpCapture() as capture:
        exporter = OTLPSpanExporter(endpoint=capture.grpc_endpoint, insecure=True)
        ...
        [span] = capture.wait_for_spans(1, timeout_s=5)
        assert span.parent_span_id == "00f067aa0ba902b7"
"""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from aiohttp import web
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["CapturedEvent", "CapturedLink", "CapturedLogRecord", "CapturedSpan", "OtlpCapture", "RecordedExport"]

T = TypeVar("T")
_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
_LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
_PROTOBUF = "application/x-protobuf"


def any_value(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as plain Python (lists for arrays, dicts for kvlists)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, kind)


def attributes(kvs: Sequence[KeyValue]) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in kvs}


@dataclass(frozen=True, kw_only=True)
class CapturedEvent:
    name: str
    time_unix_nano: int
    attributes: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class CapturedLink:
    trace_id: str
    span_id: str
    attributes: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class CapturedSpan:
    """One received span, ids as lowercase hex (``parent_span_id`` is "" for a root)."""

    transport: str  # grpc | http
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int  # opentelemetry.proto.trace.v1.Span.SpanKind value (1 = INTERNAL)
    start_time_unix_nano: int
    end_time_unix_nano: int
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    attributes: dict[str, Any]
    events: list[CapturedEvent]
    links: list[CapturedLink]
    resource: dict[str, Any]
    scope_name: str
    scope_version: str


@dataclass(frozen=True, kw_only=True)
class CapturedLogRecord:
    """One received log record, ids as lowercase hex ("" when unset)."""

    transport: str
    time_unix_nano: int
    observed_time_unix_nano: int
    severity_number: int
    severity_text: str
    event_name: str
    body: Any
    attributes: dict[str, Any]
    trace_id: str
    span_id: str
    flags: int
    resource: dict[str, Any]
    scope_name: str


@dataclass(frozen=True, kw_only=True)
class RecordedExport:
    """One export request as received; ``failed`` when a scripted failure answered it.

    ``request`` is an ``ExportTraceServiceRequest`` (``signal`` traces) or an
    ``ExportLogsServiceRequest`` (``signal`` logs).
    """

    transport: str
    request: Any
    headers: dict[str, str]
    failed: bool
    signal: str = "traces"
    #: the request body as received (decompressed), for byte-for-byte captures
    raw: bytes = b""


@dataclass(kw_only=True)
class _Failures:
    remaining: int = 0
    grpc_code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE
    http_status: int = 503


@dataclass
class _State:
    exports: list[RecordedExport] = field(default_factory=list)
    spans: list[CapturedSpan] = field(default_factory=list)
    logs: list[CapturedLogRecord] = field(default_factory=list)


def flatten_logs(transport: str, request: ExportLogsServiceRequest) -> list[CapturedLogRecord]:
    out = []
    for rl in request.resource_logs:
        resource = attributes(rl.resource.attributes)
        for sl in rl.scope_logs:
            for r in sl.log_records:
                out.append(
                    CapturedLogRecord(
                        transport=transport,
                        time_unix_nano=r.time_unix_nano,
                        observed_time_unix_nano=r.observed_time_unix_nano,
                        severity_number=r.severity_number,
                        severity_text=r.severity_text,
                        event_name=r.event_name,
                        body=any_value(r.body) if r.HasField("body") else None,
                        attributes=attributes(r.attributes),
                        trace_id=r.trace_id.hex(),
                        span_id=r.span_id.hex(),
                        flags=r.flags,
                        resource=resource,
                        scope_name=sl.scope.name,
                    )
                )
    return out


def flatten(transport: str, request: ExportTraceServiceRequest) -> list[CapturedSpan]:
    out = []
    for rs in request.resource_spans:
        resource = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(
                    CapturedSpan(
                        transport=transport,
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex(),
                        name=s.name,
                        kind=s.kind,
                        start_time_unix_nano=s.start_time_unix_nano,
                        end_time_unix_nano=s.end_time_unix_nano,
                        status_code=s.status.code,
                        status_message=s.status.message,
                        attributes=attributes(s.attributes),
                        events=[
                            CapturedEvent(
                                name=e.name, time_unix_nano=e.time_unix_nano, attributes=attributes(e.attributes)
                            )
                            for e in s.events
                        ],
                        links=[
                            CapturedLink(
                                trace_id=link.trace_id.hex(),
                                span_id=link.span_id.hex(),
                                attributes=attributes(link.attributes),
                            )
                            for link in s.links
                        ],
                        resource=resource,
                        scope_name=ss.scope.name,
                        scope_version=ss.scope.version,
                    )
                )
    return out


class OtlpCapture:
    """Records OTLP trace exports over gRPC and HTTP; use as a context manager (or start/stop)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self._cond = threading.Condition()
        self._state = _State()
        self._failures = _Failures()
        self._grpc: grpc.Server | None = None
        self._grpc_port = 0
        self._http_port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> OtlpCapture:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        server = grpc.server(ThreadPoolExecutor(max_workers=4, thread_name_prefix="otlp-capture-grpc"))
        handler = grpc.unary_unary_rpc_method_handler(
            self._grpc_export,
            request_deserializer=lambda raw: raw,
            response_serializer=ExportTraceServiceResponse.SerializeToString,
        )
        logs_handler = grpc.unary_unary_rpc_method_handler(
            self._grpc_export_logs,
            request_deserializer=lambda raw: raw,
            response_serializer=ExportLogsServiceResponse.SerializeToString,
        )
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(_SERVICE, {"Export": handler}),
                grpc.method_handlers_generic_handler(_LOGS_SERVICE, {"Export": logs_handler}),
            )
        )
        self._grpc_port = server.add_insecure_port(f"{self.host}:0")
        server.start()
        self._grpc = server

        started = threading.Event()
        errors: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._serve_http, args=(started, errors), name="otlp-capture-http", daemon=True
        )
        self._thread.start()
        started.wait(10)
        if errors or not self._http_port:
            self.stop()
            raise RuntimeError(f"OTLP/HTTP capture server did not start: {errors}")

    def stop(self) -> None:
        if self._grpc is not None:
            self._grpc.stop(grace=None)
            self._grpc = None
        loop, runner = self._loop, self._runner
        if loop is not None and runner is not None and loop.is_running():
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        self._loop = self._runner = None

    def _serve_http(self, started: threading.Event, errors: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            app = web.Application(client_max_size=64 * 1024 * 1024)
            app.router.add_post("/v1/traces", self._http_export)
            # Langfuse's SDK exports to its own server's path under the host it is given.
            app.router.add_post("/api/public/otel/v1/traces", self._http_export)
            app.router.add_post("/v1/logs", self._http_export)
            app.router.add_post("/v1/metrics", self._http_metrics)
            runner = web.AppRunner(app, access_log=None)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, self.host, 0)
            loop.run_until_complete(site.start())
            self._runner = runner
            self._http_port = runner.addresses[0][1]
        except BaseException as exc:  # reported to start()
            errors.append(exc)
            started.set()
            loop.close()
            return
        started.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    # --- endpoints -------------------------------------------------------------------------

    @property
    def grpc_endpoint(self) -> str:
        """``http://127.0.0.1:PORT`` (the scheme makes the SDK gRPC exporter use plaintext)."""
        return f"http://{self.host}:{self._grpc_port}"

    @property
    def grpc_target(self) -> str:
        """``127.0.0.1:PORT`` for a raw gRPC channel."""
        return f"{self.host}:{self._grpc_port}"

    @property
    def http_base_url(self) -> str:
        """Base URL as in ``OTEL_EXPORTER_OTLP_ENDPOINT`` (signal path not included)."""
        return f"http://{self.host}:{self._http_port}"

    @property
    def http_endpoint(self) -> str:
        """The full traces URL, ``http://127.0.0.1:PORT/v1/traces``."""
        return self.http_base_url + "/v1/traces"

    # --- scripting -------------------------------------------------------------------------

    def fail_next(
        self, n: int, *, grpc_code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE, http_status: int = 503
    ) -> None:
        """Answer the next ``n`` export requests (either transport) with an error."""
        with self._cond:
            self._failures = _Failures(remaining=n, grpc_code=grpc_code, http_status=http_status)

    def clear_failures(self) -> None:
        with self._cond:
            self._failures.remaining = 0

    def clear(self) -> None:
        """Forget everything recorded so far."""
        with self._cond:
            self._state = _State()

    def _record(self, transport: str, request: Any, headers: Mapping[str, str], raw: bytes = b"") -> _Failures | None:
        """Record a request; the scripted failure to answer it with, if any."""
        signal = "logs" if isinstance(request, ExportLogsServiceRequest) else "traces"
        with self._cond:
            script = self._failures
            failed = script.remaining > 0
            if failed:
                script.remaining -= 1
            self._state.exports.append(
                RecordedExport(
                    transport=transport, request=request, headers=dict(headers), failed=failed, signal=signal, raw=raw
                )
            )
            if not failed and signal == "logs":
                self._state.logs.extend(flatten_logs(transport, request))
            elif not failed:
                self._state.spans.extend(flatten(transport, request))
            self._cond.notify_all()
            return script if failed else None

    def _grpc_export(self, raw: bytes, context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        headers = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        if (failure := self._record("grpc", ExportTraceServiceRequest.FromString(raw), headers, raw)) is not None:
            context.abort(failure.grpc_code, "scripted failure")
        return ExportTraceServiceResponse()

    def _grpc_export_logs(self, raw: bytes, context: grpc.ServicerContext) -> ExportLogsServiceResponse:
        headers = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        if (failure := self._record("grpc", ExportLogsServiceRequest.FromString(raw), headers, raw)) is not None:
            context.abort(failure.grpc_code, "scripted failure")
        return ExportLogsServiceResponse()

    async def _http_export(self, http_request: web.Request) -> web.Response:
        body = await http_request.read()
        encoding = http_request.headers.get("Content-Encoding", "").lower()
        # aiohttp may have inflated the body already (auto_decompress)
        if encoding == "gzip" and body[:2] == b"\x1f\x8b":
            body = gzip.decompress(body)
        elif encoding == "deflate" and body[:1] == b"\x78":
            body = zlib.decompress(body)
        if http_request.content_type != _PROTOBUF:
            return web.Response(status=415, text=f"only {_PROTOBUF} is supported")
        logs = http_request.path == "/v1/logs"
        request: Any = ExportLogsServiceRequest() if logs else ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except Exception:  # any decode error is the client's
            return web.Response(status=400, text=f"undecodable {type(request).__name__}")
        failure = self._record("http", request, {k.lower(): v for k, v in http_request.headers.items()}, body)
        if failure is not None:
            return web.Response(status=failure.http_status, text="scripted failure")
        response = ExportLogsServiceResponse() if logs else ExportTraceServiceResponse()
        return web.Response(body=response.SerializeToString(), content_type=_PROTOBUF)

    # --- results ---------------------------------------------------------------------------

    @property
    def exports(self) -> list[RecordedExport]:
        """Every request received (including failed ones), in arrival order."""
        with self._cond:
            return list(self._state.exports)

    @property
    def trace_exports(self) -> list[RecordedExport]:
        """Every traces request accepted, in arrival order."""
        return [e for e in self.exports if e.signal == "traces" and not e.failed]

    @property
    def log_exports(self) -> list[RecordedExport]:
        """Every logs request accepted, in arrival order."""
        return [e for e in self.exports if e.signal == "logs" and not e.failed]

    async def _http_metrics(self, http_request: web.Request) -> web.Response:
        # frameworks that also export metrics get an empty success; metrics are not recorded
        await http_request.read()
        return web.Response(body=b"", content_type=_PROTOBUF)

    def spans(self) -> list[CapturedSpan]:
        """Every span of every accepted request, in arrival order."""
        with self._cond:
            return list(self._state.spans)

    def log_records(self) -> list[CapturedLogRecord]:
        """Every log record of every accepted logs request, in arrival order."""
        with self._cond:
            return list(self._state.logs)

    async def await_log_records(self, n: int, timeout_s: float = 10.0) -> list[CapturedLogRecord]:
        def wait() -> list[CapturedLogRecord]:
            return self._wait(lambda: len(self._state.logs) >= n, timeout_s, f"{n} log records", self.log_records)

        return await asyncio.to_thread(wait)

    def wait_for_spans(self, n: int, timeout_s: float = 10.0) -> list[CapturedSpan]:
        """Block until at least ``n`` spans were accepted; raises ``TimeoutError`` otherwise."""
        return self._wait(lambda: len(self._state.spans) >= n, timeout_s, f"{n} spans", self.spans)

    def wait_for_exports(self, n: int, timeout_s: float = 10.0) -> list[RecordedExport]:
        """Block until at least ``n`` requests (accepted or failed) arrived."""
        return self._wait(
            lambda: len(self._state.exports) >= n, timeout_s, f"{n} export requests", lambda: self.exports
        )

    async def await_spans(self, n: int, timeout_s: float = 10.0) -> list[CapturedSpan]:
        """:meth:`wait_for_spans` for async tests (waits in a worker thread)."""
        return await asyncio.to_thread(self.wait_for_spans, n, timeout_s)

    async def await_exports(self, n: int, timeout_s: float = 10.0) -> list[RecordedExport]:
        return await asyncio.to_thread(self.wait_for_exports, n, timeout_s)

    def _wait(self, ready: Callable[[], bool], timeout_s: float, what: str, result: Callable[[], T]) -> T:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not ready():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"waited {timeout_s:g}s for {what}; got {len(self._state.spans)} spans "
                        f"in {len(self._state.exports)} requests"
                    )
                self._cond.wait(remaining)
        return result()

    def spans_named(self, name: str) -> list[CapturedSpan]:
        return [s for s in self.spans() if s.name == name]


def capture() -> Iterator[OtlpCapture]:
    """A pytest fixture body: ``capture = pytest.fixture(otlp_capture.capture)``."""
    with OtlpCapture() as server:
        yield server
