"""OTLP/gRPC receiver: ``TraceService/Export`` and ``LogsService/Export`` on grpc.aio."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc

from tracescorer.metrics import Metrics
from tracescorer.receiver import status
from tracescorer.receiver.http import bearer_ok
from tracescorer.receiver.ingest import Encoding, IngestRefused, Ingestor, Signal

log = logging.getLogger(__name__)

_SERVICES = {
    Signal.TRACES: "opentelemetry.proto.collector.trace.v1.TraceService",
    Signal.LOGS: "opentelemetry.proto.collector.logs.v1.LogsService",
}


def _identity(data: bytes) -> bytes:
    return data


class OtlpGrpcReceiver:
    """A grpc.aio server; requests are decoded by us (undecodable -> INVALID_ARGUMENT)."""

    def __init__(
        self,
        ingestor: Ingestor,
        metrics: Metrics,
        *,
        host: str,
        port: int,
        max_message_bytes: int,
        auth_token: str = "",
        cert_file: Path | None = None,
        key_file: Path | None = None,
    ) -> None:
        self._ingestor = ingestor
        self._metrics = metrics
        self._token = auth_token
        self._address = f"{host}:{port}"
        self._tls = (cert_file, key_file) if cert_file and key_file else None
        self._server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.max_send_message_length", 4 * 1024 * 1024),
            ],
        )
        for signal, service in _SERVICES.items():
            handler = grpc.unary_unary_rpc_method_handler(
                self._handler(signal), request_deserializer=_identity, response_serializer=_identity
            )
            self._server.add_generic_rpc_handlers(
                (grpc.method_handlers_generic_handler(service, {"Export": handler}),)
            )
        self.port = 0

    async def start(self) -> int:
        try:
            if self._tls is not None:
                cert, key = self._tls
                creds = grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())])
                self.port = self._server.add_secure_port(self._address, creds)
            else:
                self.port = self._server.add_insecure_port(self._address)
        except RuntimeError:  # grpc's "Failed to bind": in use, or not an address of this host
            self.port = 0
        if self.port == 0:
            raise OSError(f"OTLP gRPC receiver (receiver.grpc): cannot listen on {self._address} "
                          "(address in use, or not an address of this host)")
        await self._server.start()
        return self.port

    async def stop(self, grace_s: float) -> None:
        """Refuse new RPCs and let in-flight ones finish (up to ``grace_s``)."""
        await self._server.stop(grace_s)

    def _handler(self, signal: Signal) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable[bytes]]:
        async def export(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            started = time.perf_counter()
            try:
                return await self._export(signal, request, context)
            finally:
                self._metrics.request_seconds.labels("grpc").observe(time.perf_counter() - started)

        return export

    async def _export(self, signal: Signal, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        if self._token:
            metadata = dict(context.invocation_metadata() or ())
            header = metadata.get("authorization")
            if not bearer_ok(header if isinstance(header, str) else None, self._token):
                self._metrics.requests.labels("grpc", signal.value, "unauthenticated").inc()
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")
        try:
            # grpc hands a call over once its message is in: its place among the requests in flight starts here
            ticket = self._ingestor.enter(signal)
            try:
                outcome = await self._ingestor.ingest(signal, Encoding.PROTOBUF, request, ticket)
            finally:
                self._ingestor.leave(ticket)
        except IngestRefused as exc:
            self._metrics.requests.labels("grpc", signal.value, exc.reason).inc()
            if not exc.retryable:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            # OTLP: RESOURCE_EXHAUSTED is retryable only with RetryInfo; UNAVAILABLE always is.
            code = grpc.StatusCode.RESOURCE_EXHAUSTED if exc.reason == "backpressure" else grpc.StatusCode.UNAVAILABLE
            rpc_code = status.RESOURCE_EXHAUSTED if exc.reason == "backpressure" else status.UNAVAILABLE
            await context.abort(
                code,
                str(exc),
                trailing_metadata=(
                    ("google.rpc.retryinfo-bin", status.retry_info(exc.retry_after_s)),
                    ("grpc-status-details-bin", status.status_protobuf(rpc_code, str(exc), exc.retry_after_s)),
                ),
            )
        self._metrics.requests.labels("grpc", signal.value, "partial" if outcome.rejected else "ok").inc()
        return status.export_response_protobuf(signal, outcome)
