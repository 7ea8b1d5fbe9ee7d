"""The daemon's listeners, built from the settings: the OTLP gRPC receiver, the OTLP HTTP server
(with ``/metrics``, ``/healthz`` and ``/readyz`` beside it) and the ops API; and the connections
each receiver may hold, lowered in proportion when the open-files limit leaves too little room."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from tracescorer.api import ControlApi, OpsApi
from tracescorer.config import Settings
from tracescorer.http_server import API_LIMITS, HttpServer, server_ssl_context
from tracescorer.metrics import Metrics
from tracescorer.receiver import fdlimit
from tracescorer.receiver.body import BodyLimits
from tracescorer.receiver.connections import ConnectionLimits
from tracescorer.receiver.grpc import OtlpGrpcReceiver
from tracescorer.receiver.http import OtlpHttpHandler
from tracescorer.receiver.ingest import Ingestor


def wanted_connections(settings: Settings) -> dict[str, int]:
    """Connections each enabled receiver (``grpc``, ``http``) may hold, before the open-files limit."""
    r = settings.receiver
    caps: dict[str, int] = {}
    if r.grpc.enabled:
        caps["grpc"] = r.max_connections
    if r.http.enabled:
        caps["http"] = r.max_connections
    return caps


def shared_connections(settings: Settings) -> dict[str, int]:
    """:func:`wanted_connections`, fitted to the descriptors the process may still open, less the
    ops API's own fixed share."""
    room = fdlimit.headroom()
    if room is not None and settings.api.enabled:
        room -= API_LIMITS.max_connections  # the ops API's own, fixed
    return fdlimit.share_connections(wanted_connections(settings), room)


def _limits(settings: Settings, max_connections: int) -> ConnectionLimits:
    r = settings.receiver
    return ConnectionLimits(
        max_connections=max_connections, header_timeout_s=r.header_timeout_s, idle_timeout_s=r.idle_timeout_s
    )


def grpc_receiver(
    settings: Settings,
    ingestor: Ingestor,
    metrics: Metrics,
    *,
    max_connections: int,
    readiness: Callable[[], str | None],
) -> OtlpGrpcReceiver:
    """The OTLP gRPC receiver (``receiver.grpc``); its health check answers from ``readiness``."""
    r = settings.receiver
    return OtlpGrpcReceiver(
        ingestor,
        metrics,
        host=r.grpc.host,
        port=r.grpc.port,
        max_message_bytes=r.max_message_bytes,
        auth_token=r.auth_token,
        cert_file=r.tls.cert_file,
        key_file=r.tls.key_file,
        limits=_limits(settings, max_connections),
        max_concurrent_streams=max(128, 2 * r.max_concurrent_requests),
        readiness=readiness,
        grace_cap_s=r.request_timeout_s,
    )


def otlp_http(
    settings: Settings, ingestor: Ingestor, metrics: Metrics, ops: OpsApi, *, max_connections: int
) -> HttpServer:
    """The OTLP HTTP receiver (``receiver.http``), serving ``ops``'s probes and ``/metrics`` too."""
    s = settings
    r = s.receiver
    handler = OtlpHttpHandler(
        ingestor,
        metrics,
        max_message_bytes=r.max_message_bytes,
        auth_token=r.auth_token,
        body=BodyLimits(
            max_bytes=r.max_message_bytes, timeout_s=r.body_timeout_s, min_bytes_per_s=r.min_body_bytes_per_s
        ),
    )
    webapp = web.Application(client_max_size=r.max_message_bytes)
    webapp.add_routes(handler.routes() + ops.routes())
    return HttpServer(
        webapp,
        host=r.http.host,
        port=r.http.port,
        what="OTLP HTTP receiver (receiver.http)",
        ssl_context=server_ssl_context(r.tls.cert_file, r.tls.key_file),
        shutdown_timeout_s=min(r.request_timeout_s, s.shutdown.grace_s / 4),
        limits=_limits(settings, max_connections),
        listener="http",
        metrics=metrics,
        auto_decompress=False,  # we inflate ourselves, the size limit applied to the inflated body
    )


def ops_api(settings: Settings, control: ControlApi, metrics: Metrics) -> HttpServer:
    """The ops API listener (``api``): queries, backfills and labels for the read commands."""
    s = settings
    return HttpServer(
        control.app(),
        host=s.api.host,
        port=s.api.port,
        what="ops API (api)",
        ssl_context=server_ssl_context(s.receiver.tls.cert_file, s.receiver.tls.key_file),
        metrics=metrics,
    )
