"""OTLP export requests over gRPC or HTTP/protobuf, with every answer classified.

The SDK's exporters return only SUCCESS/FAILURE, so a request the backend refuses for good
(HTTP 400, gRPC INVALID_ARGUMENT) cannot be told from an outage. This client sends an already
encoded ``Export*ServiceRequest`` itself (``grpc.aio`` / aiohttp, nothing blocks the loop) and
maps the answer to an :class:`~tracescorer.export.sink.ItemResult` following the OTLP spec:
gRPC codes CANCELLED, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, OUT_OF_RANGE, UNAVAILABLE,
DATA_LOSS and HTTP 408/425/429/5xx are retryable (``RetryInfo`` / ``Retry-After`` honoured), other
codes are rejections; a ``partial_success`` rejecting every item is a rejection too.

Unset settings come from the standard ``OTEL_EXPORTER_OTLP_[TRACES_|LOGS_]*`` variables
(endpoint, protocol, headers, timeout, compression, certificate, client key/certificate,
insecure), as in the SDK exporters.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlparse

from tracescorer.config import ConfigError
from tracescorer.export.sink import ExportResult, ItemResult, http_result

log = logging.getLogger(__name__)

Signal = Literal["traces", "logs"]
_METHODS = {
    "traces": "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    "logs": "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
}
_RETRYABLE_GRPC = frozenset(
    {"CANCELLED", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED", "OUT_OF_RANGE", "UNAVAILABLE", "DATA_LOSS"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class OtlpTarget:
    """Where and how to send one signal (resolved from settings and the environment)."""

    signal: Signal
    protocol: Literal["grpc", "http/protobuf"]
    endpoint: str  # HTTP: the full URL; gRPC: host:port
    secure: bool
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 10.0
    gzip: bool = False
    certificate_file: str | None = None
    client_key_file: str | None = None
    client_certificate_file: str | None = None


def _env(signal: Signal, name: str, environ: Mapping[str, str]) -> str | None:
    for key in (f"OTEL_EXPORTER_OTLP_{signal.upper()}_{name}", f"OTEL_EXPORTER_OTLP_{name}"):
        value = environ.get(key, "").strip()
        if value:
            return value
    return None


def resolve_target(
    signal: Signal,
    *,
    endpoint: str | None,
    protocol: str | None,
    headers: Mapping[str, str],
    timeout_s: float,
    compression: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> OtlpTarget:
    """Fill what the settings leave unset from ``OTEL_EXPORTER_OTLP_*`` (raises ConfigError).

    HTTP: a base URL gets ``/v1/traces`` or ``/v1/logs`` appended unless it ends with it already
    (the signal-specific variable is used as given). gRPC: ``http://`` means plaintext,
    ``https://`` TLS, no scheme follows ``OTEL_EXPORTER_OTLP_INSECURE``.
    """
    env = os.environ if environ is None else environ
    path = f"/v1/{signal}"
    if protocol is None:
        protocol = _env(signal, "PROTOCOL", env) or "grpc"
        if protocol not in ("grpc", "http/protobuf"):
            raise ConfigError(
                f"OTEL_EXPORTER_OTLP_PROTOCOL: unsupported protocol {protocol!r} (use grpc or http/protobuf)"
            )
    signal_endpoint = env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip() or None
    raw = endpoint or signal_endpoint or env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or None
    if not headers:
        from opentelemetry.util.re import parse_env_headers

        headers = dict(parse_env_headers(_env(signal, "HEADERS", env) or "", liberal=True))
    compression = compression or _env(signal, "COMPRESSION", env)
    files = {k: _env(signal, k, env) for k in ("CERTIFICATE", "CLIENT_KEY", "CLIENT_CERTIFICATE")}
    common: dict[str, Any] = {
        "signal": signal,
        "headers": dict(headers),
        "timeout_s": timeout_s,
        "gzip": compression == "gzip",
        "certificate_file": files["CERTIFICATE"],
        "client_key_file": files["CLIENT_KEY"],
        "client_certificate_file": files["CLIENT_CERTIFICATE"],
    }
    if protocol == "http/protobuf":
        url = (raw or "http://localhost:4318").rstrip("/")
        if "://" not in url:
            raise ConfigError(f"OTLP/HTTP endpoint {url!r} needs a scheme (http:// or https://)")
        as_given = endpoint is None and signal_endpoint is not None  # the signal's own variable is a full URL
        if not url.endswith(path) and not as_given:
            url += path
        return OtlpTarget(protocol="http/protobuf", endpoint=url, secure=url.startswith("https://"), **common)
    url = raw or "http://localhost:4317"
    parsed = urlparse(url if "://" in url else f"//{url}")
    if not parsed.hostname:
        raise ConfigError(f"OTLP/gRPC endpoint {url!r} has no host")
    insecure = (_env(signal, "INSECURE", env) or "").lower() == "true"
    secure = parsed.scheme == "https" or (parsed.scheme not in ("http", "https") and not insecure)
    port = parsed.port or 4317
    host = f"[{parsed.hostname}]" if ":" in parsed.hostname else parsed.hostname
    return OtlpTarget(protocol="grpc", endpoint=f"{host}:{port}", secure=secure, **common)


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read()


class OtlpClient:
    """Sends encoded export requests of one signal to one target. Use on one event loop."""

    def __init__(self, target: OtlpTarget) -> None:
        self.target = target
        self._channel: Any = None
        self._session: Any = None

    async def send(self, payload: bytes, items: int) -> ItemResult:
        """Send one request of ``items`` records; never raises."""
        try:
            if self.target.protocol == "grpc":
                return await self._send_grpc(payload, items)
            return await self._send_http(payload, items)
        except Exception as exc:  # whatever the transport raised, the batch is retried
            log.debug("OTLP %s export to %s raised", self.target.signal, self.target.endpoint, exc_info=True)
            return ItemResult(result=ExportResult.RETRY, error=f"{type(exc).__name__}: {exc}")

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    # --- gRPC ------------------------------------------------------------------------------

    async def _send_grpc(self, payload: bytes, items: int) -> ItemResult:
        import grpc

        t = self.target
        if self._channel is None:
            if t.secure:
                credentials = grpc.ssl_channel_credentials(
                    _read(t.certificate_file), _read(t.client_key_file), _read(t.client_certificate_file)
                )
                self._channel = grpc.aio.secure_channel(t.endpoint, credentials)
            else:
                self._channel = grpc.aio.insecure_channel(t.endpoint)
        call = self._channel.unary_unary(_METHODS[t.signal])
        metadata = tuple((k.lower(), v) for k, v in t.headers.items())
        try:
            reply = await call(
                payload, metadata=metadata, timeout=t.timeout_s, compression=grpc.Compression.Gzip if t.gzip else None
            )
        except grpc.aio.AioRpcError as exc:
            code = exc.code().name
            error = f"gRPC {code}: {exc.details() or ''}".strip()
            if code not in _RETRYABLE_GRPC:
                return ItemResult(result=ExportResult.REJECTED, error=error)
            return ItemResult(
                result=ExportResult.RETRY, error=error, retry_after_s=_retry_info(exc.trailing_metadata())
            )
        return self._partial(reply, items)

    # --- HTTP ------------------------------------------------------------------------------

    async def _send_http(self, payload: bytes, items: int) -> ItemResult:
        import aiohttp

        t = self.target
        if self._session is None:
            ssl_context: ssl.SSLContext | bool = True
            if t.secure and (t.certificate_file or t.client_certificate_file):
                ssl_context = ssl.create_default_context(cafile=t.certificate_file)
                if t.client_certificate_file:
                    ssl_context.load_cert_chain(t.client_certificate_file, t.client_key_file)
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ssl_context))
        headers = {"Content-Type": "application/x-protobuf", **t.headers}
        body = payload
        if t.gzip:
            body = gzip.compress(payload)
            headers["Content-Encoding"] = "gzip"
        timeout = aiohttp.ClientTimeout(total=t.timeout_s)
        async with self._session.post(t.endpoint, data=body, headers=headers, timeout=timeout) as resp:
            data = await resp.read()
            if 200 <= resp.status < 300:
                return self._partial(data, items)
            text = (
                data.decode("utf-8", "replace")
                if resp.content_type != "application/x-protobuf"
                else _status_message(data)
            )
            return http_result(resp.status, text, resp.headers.get("Retry-After"))

    def _partial(self, reply: bytes, items: int) -> ItemResult:
        """2xx / OK: a ``partial_success`` that rejected every item is a rejection."""
        if self.target.signal == "traces":
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

            trace_response = ExportTraceServiceResponse()
            trace_response.ParseFromString(reply)
            rejected, message = (
                trace_response.partial_success.rejected_spans,
                trace_response.partial_success.error_message,
            )
        else:
            from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

            logs_response = ExportLogsServiceResponse()
            logs_response.ParseFromString(reply)
            rejected = logs_response.partial_success.rejected_log_records
            message = logs_response.partial_success.error_message
        if rejected and rejected >= items:
            return ItemResult(
                result=ExportResult.REJECTED, error=f"partial success, all {rejected} rejected: {message}"
            )
        if rejected or message:
            log.warning(
                "OTLP %s export to %s: partial success, %d of %d rejected: %s",
                self.target.signal,
                self.target.endpoint,
                rejected,
                items,
                message,
            )
        return ItemResult.ok()


def _retry_info(metadata: Any) -> float | None:
    for key, value in metadata or ():
        if key == "google.rpc.retryinfo-bin":
            from google.rpc.error_details_pb2 import RetryInfo

            info = RetryInfo()
            info.ParseFromString(value)
            return float(info.retry_delay.seconds + info.retry_delay.nanos / 1e9)
    return None


def _status_message(data: bytes) -> str:
    """The message of a protobuf ``google.rpc.Status`` error body (OTLP/HTTP error replies)."""
    try:
        from google.rpc.status_pb2 import Status

        status = Status()
        status.ParseFromString(data)
        return str(status.message)
    except Exception:  # noqa: BLE001 - not a Status: show nothing rather than bytes
        return ""


async def close_quietly(client: OtlpClient) -> None:
    try:
        await asyncio.wait_for(client.close(), 5)
    except Exception:  # closing a channel must not fail a shutdown
        log.debug("closing the OTLP client failed", exc_info=True)


class OtlpRequestSink:
    """A sink sending each batch as one OTLP request built by :meth:`request` (spans or logs)."""

    kind = ""

    def __init__(self, target: OtlpTarget) -> None:
        self.target = target
        self._client = OtlpClient(target)

    def request(self, batch: Any) -> Any:
        """The protobuf export request of a batch of due scores."""
        raise NotImplementedError

    async def export(self, batch: Any) -> list[ItemResult]:
        if not batch:
            return []
        payload = self.request(batch).SerializeToString()
        return [await self._client.send(payload, len(batch))] * len(batch)

    async def force_flush(self, timeout_s: float) -> bool:
        return True  # nothing is buffered here: the delivery table is the buffer

    async def shutdown(self) -> None:
        await close_quietly(self._client)
