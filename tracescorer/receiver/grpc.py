"""OTLP/gRPC receiver: ``TraceService/Export`` and ``LogsService/Export`` on grpc.aio."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc

from tracescorer.aio import cancel
from tracescorer.lifecycle import seconds_left
from tracescorer.metrics import Metrics
from tracescorer.receiver import grpc_room, status
from tracescorer.receiver.connections import ConnectionLimits
from tracescorer.receiver.health import HealthService
from tracescorer.receiver.http import bearer_ok
from tracescorer.receiver.ingest import Encoding, Ingestor, IngestOutcome, IngestRefused, Signal

log = logging.getLogger(__name__)

_SERVICES = {
    Signal.TRACES: "opentelemetry.proto.collector.trace.v1.TraceService",
    Signal.LOGS: "opentelemetry.proto.collector.logs.v1.LogsService",
}


#: the interpreter's thread switch interval while the receiver runs (see OtlpGrpcReceiver.start)
SWITCH_INTERVAL_S = 0.001


def _identity(data: bytes) -> bytes:
    return data


class OtlpGrpcReceiver:
    """A grpc.aio server on an event loop of its own thread; requests are decoded by us
    (undecodable -> INVALID_ARGUMENT) on the daemon's loop.

    Why a loop of its own: grpc.aio hands calls over only as its loop turns, and under load a turn
    of the daemon's loop (decoding, assembly, scoring) takes tens of milliseconds. On that loop,
    with 256 requests in flight at 1.4x capacity, handlers took 0.1 s (p50) but clients waited
    8 s: the calls queued inside grpc, unseen by admission, so none was refused. Here grpc's loop
    only moves calls: each is counted among the requests in flight as it arrives and refused at
    once beyond ``receiver.max_concurrent_requests`` (same load: p50 0.28 s, p99 0.63 s, the rest refused as
    retryable).
    """

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
        limits: ConnectionLimits | None = None,
        max_concurrent_streams: int = 64,
        readiness: Callable[[], str | None] | None = None,
        grace_cap_s: float = 30.0,
    ) -> None:
        self._ingestor = ingestor
        self._grace_cap_s = grace_cap_s  # in-flight requests' time to finish at stop, at most
        self._metrics = metrics
        self._token = auth_token
        self._address = f"{host}:{port}"
        self._tls = (cert_file, key_file) if cert_file and key_file else None
        self._max_message_bytes = max_message_bytes
        self._limits = limits or ConnectionLimits()
        self._max_streams = max_concurrent_streams
        self._health = HealthService(readiness or (lambda: None), list(_SERVICES.values()))
        self._health_task: asyncio.Task[None] | None = None
        self._room_task: asyncio.Task[None] | None = None  # on grpc's loop
        self._waiting = 0  # calls handed to the daemon's loop and not answered (grpc's loop only)
        self._server: grpc.aio.Server | None = None
        self._main: asyncio.AbstractEventLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._switch_s = sys.getswitchinterval()
        self.port = 0

    @property
    def calls_waiting(self) -> int:
        """Calls handed to the daemon's loop and not answered yet."""
        return self._waiting

    async def start(self) -> None:
        """Start grpc's loop and thread, and the server on it (the port in :attr:`port`)."""
        self._main = asyncio.get_running_loop()
        # the daemon's loop holds the GIL most of the time under load, and each hand-over between
        # the loops waits up to the switch interval: at the default 5 ms, ack p50 was 127 ms at a
        # tenth of walk (~50 ms before); at 1 ms it is ~50 ms for ~4% more CPU per span
        self._switch_s = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_s, SWITCH_INTERVAL_S))
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, args=(loop,), name="otlp-grpc", daemon=True)
        self._thread.start()
        try:
            port = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._start(), loop))
        except BaseException:
            self._stop_loop()
            raise
        self._health_task = asyncio.create_task(self._health.watch(loop), name="grpc-health")
        self.port = port

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.close()

    def _stop_loop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10.0)
            sys.setswitchinterval(self._switch_s)
        self._loop = self._thread = None

    async def _start(self) -> int:
        """On grpc's loop: build the server there (grpc.aio binds to the loop it is made on)."""
        servers_before = grpc_room.server_ids()
        self._server = grpc.aio.server(options=self._options())
        await self._health.add_to(self._server)
        for signal, service in _SERVICES.items():
            handler = grpc.unary_unary_rpc_method_handler(
                self._handler(signal), request_deserializer=_identity, response_serializer=_identity
            )
            self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {"Export": handler}),))
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
            raise OSError(
                f"OTLP gRPC receiver (receiver.grpc): cannot listen on {self._address} "
                "(address in use, or not an address of this host)"
            )
        await self._server.start()
        self._keep_room(grpc_room.server_ids() - servers_before)
        return self.port

    def _keep_room(self, new_servers: set[int]) -> None:
        """On grpc's loop: keep room under the connection cap (see grpc_room), counting the
        connections on /metrics; channelz must tell this server from any other in the process."""
        if len(new_servers) != 1:
            log.warning("OTLP gRPC receiver: channelz does not tell its server apart: idle connections are not evicted")
            return
        closed = self._metrics.connections_closed.labels("grpc", "evicted")
        keeper = grpc_room.RoomKeeper(new_servers.pop(), self.port, self._limits.max_connections, closed.inc)
        self._metrics.connections.labels("grpc").set_function(lambda: keeper.open)

        async def keep() -> None:
            while True:
                await asyncio.sleep(grpc_room.CHECK_INTERVAL_S)
                try:
                    if evicted := keeper.check():
                        log.debug("OTLP gRPC receiver: %d idle connections closed to keep room", evicted)
                except (ValueError, KeyError, OSError) as exc:  # channelz's answer, or /proc, not as expected
                    log.warning("OTLP gRPC receiver: cannot count its connections (%s): idle ones are not evicted", exc)
                    return

        self._room_task = asyncio.create_task(keep(), name="grpc-room")

    def _options(self) -> list[tuple[str, int]]:
        """grpc core's own bounds (what grpc.aio can set): its connections are accepted and kept
        in C, out of the event loop's sight, so the cap and timeouts are grpc's (grpc_room keeps
        room under the cap)."""
        limits = self._limits
        return [
            ("grpc.max_receive_message_length", self._max_message_bytes),
            ("grpc.max_send_message_length", 4 * 1024 * 1024),
            # beyond it a new connection is closed as it is accepted, before any handshake
            ("grpc.max_allowed_incoming_connections", limits.max_connections),
            # a connection that has not sent its HTTP/2 preface and settings by then is closed
            ("grpc.server_handshake_timeout_ms", int(limits.header_timeout_s * 1000)),
            # no RPC in flight for this long: GOAWAY (a client's channel reconnects on its next RPC)
            ("grpc.max_connection_idle_ms", int(limits.idle_timeout_s * 1000)),
            # a connection with RPCs in flight is pinged this often, closed if the ping goes unanswered
            ("grpc.keepalive_time_ms", int(limits.idle_timeout_s * 1000)),
            ("grpc.keepalive_timeout_ms", int(limits.header_timeout_s * 1000)),
            # streams one connection may hold open (a client opening many cannot pin more); well
            # above max_concurrent_requests: calls past that must reach the handler and be refused as
            # retryable at once, not wait inside the client (grpc clients share one connection per target)
            ("grpc.max_concurrent_streams", self._max_streams),
        ]

    async def stop(self, deadline: float) -> bool:
        """Report NOT_SERVING, refuse new RPCs and let in-flight ones finish (a quarter of the time
        left before ``deadline``, at most ``grace_cap_s``: the later stages need the rest), then
        end grpc's loop."""
        if self._loop is None:
            return True
        grace_s = min(self._grace_cap_s, seconds_left(deadline) / 4)
        if self._health_task is not None:
            await cancel([self._health_task])
            self._health_task = None
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._health.shut_down(), self._loop))
        if self._room_task is not None:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(cancel([self._room_task]), self._loop))
            self._room_task = None
        server = self._server
        if server is not None:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(server.stop(grace_s), self._loop))
        self._stop_loop()
        return True

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
        try:  # the calls the daemon's loop holds already: refused here, at once
            self._ingestor.check_requests(signal, self._waiting)
        except IngestRefused as exc:
            await self._abort(signal, exc, context)
        assert self._main is not None
        self._waiting += 1
        try:
            # on the daemon's loop, to the end whatever the client does (a hang-up cancels only this wait)
            outcome = await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(self._ingest(signal, request), self._main)
            )
        except IngestRefused as exc:
            await self._abort(signal, exc, context)
        finally:
            self._waiting -= 1
        self._metrics.requests.labels("grpc", signal.value, "partial" if outcome.rejected else "ok").inc()
        return status.export_response_protobuf(signal, outcome)

    async def _abort(self, signal: Signal, exc: IngestRefused, context: grpc.aio.ServicerContext) -> None:
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

    async def _ingest(self, signal: Signal, request: bytes) -> IngestOutcome:
        """On the daemon's loop: the request's place among those in flight, then ingest."""
        ticket = self._ingestor.enter(signal)
        try:
            return await self._ingestor.ingest(signal, Encoding.PROTOBUF, request, ticket)
        finally:
            self._ingestor.leave(ticket)
