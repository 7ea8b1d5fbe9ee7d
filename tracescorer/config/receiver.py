"""The listeners: ``receiver`` (OTLP gRPC and HTTP: bounds, timeouts, TLS, ingest token), ``api``
(the ops API) and ``metrics`` (the ``/metrics`` token)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from tracescorer.config.base import Section


class ListenerSettings(Section):
    # loopback, as the Collector's receivers since v0.104: exposing OTLP is a choice
    # (TRACESCORER_RECEIVER__GRPC__HOST=0.0.0.0; the Docker image makes it)
    host: str = "127.0.0.1"
    port: int = Field(4317, ge=0, le=65535, description="0 = any free port")
    enabled: bool = True


# One class per listener, so a partial override (only `host`) keeps that listener's own port.
class GrpcListenerSettings(ListenerSettings):
    port: int = Field(4317, ge=0, le=65535, description="0 = any free port")


class HttpListenerSettings(ListenerSettings):
    port: int = Field(4318, ge=0, le=65535, description="0 = any free port")


class ApiSettings(ListenerSettings):
    """The ops API (queries, backfill): its own listener and token, never the ingest token."""

    host: str = "127.0.0.1"
    port: int = Field(4320, ge=0, le=65535, description="0 = any free port")


class MetricsSettings(Section):
    auth_token: str = Field("", description="bearer token /metrics requires; empty = open")


class TLSSettings(Section):
    cert_file: Path | None = None
    key_file: Path | None = None

    @model_validator(mode="after")
    def _both_or_neither(self) -> TLSSettings:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file must be given together")
        for path in (self.cert_file, self.key_file):
            if path is not None and not path.is_file():
                raise ValueError(f"file not found: {path}")
        return self

    @property
    def enabled(self) -> bool:
        return self.cert_file is not None


class ReceiverSettings(Section):
    grpc: GrpcListenerSettings = GrpcListenerSettings()
    http: HttpListenerSettings = HttpListenerSettings()
    max_message_bytes: int = Field(16 * 1024 * 1024, gt=0)
    auth_token: str = ""
    tls: TLSSettings = TLSSettings()
    max_queue_items: int = Field(20_000, gt=0, description="spans + log records waiting for commit")
    max_inflight_bytes: int = Field(
        32 * 1024 * 1024,
        gt=0,
        description="request bytes received (counted as they arrive), decoded or waiting for commit; beyond: 429",
    )
    max_concurrent_requests: int = Field(
        64,
        gt=0,
        description="requests in flight at both receivers (an HTTP request counts from its body's first "
        "bytes); beyond: 429 / RESOURCE_EXHAUSTED",
    )
    retry_after_s: int = Field(1, ge=0)
    request_timeout_s: float = Field(30.0, gt=0)
    max_connections: int = Field(
        1024,
        gt=0,
        description="open connections at each receiver (HTTP, gRPC); at HTTP a new one past it closes the "
        "longest-idle one (refused when all are busy), at gRPC it is refused; lowered at start to what the "
        "open-files limit leaves room for",
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        description="a new connection's request headers (HTTP) or HTTP/2 handshake (gRPC) must arrive within "
        "this; at HTTP also the next request's headers from their first byte",
    )
    idle_timeout_s: float = Field(
        60.0, gt=0, description="a connection with no request in flight for this long is closed (keep-alive)"
    )
    body_timeout_s: float = Field(
        10.0,
        gt=0,
        description="an HTTP request body must arrive within this plus one second per min_body_bytes_per_s "
        "bytes received; a slower one is cut off with 408",
    )
    min_body_bytes_per_s: int = Field(
        1024, gt=0, description="the slowest HTTP request body accepted (see body_timeout_s)"
    )

    @model_validator(mode="after")
    def _timeouts(self) -> ReceiverSettings:
        if self.header_timeout_s > self.idle_timeout_s:
            raise ValueError("header_timeout_s must not exceed idle_timeout_s")
        return self
