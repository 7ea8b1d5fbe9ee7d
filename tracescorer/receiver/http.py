"""OTLP/HTTP receiver routes: ``POST /v1/traces`` and ``POST /v1/logs`` (protobuf or JSON, gzip).

The same routes answer under ``/api/public/otel`` too: the path the Langfuse SDK (v3 and later)
exports to, so its exporter can point at tracescorer with only its base URL changed.
"""

from __future__ import annotations

import hmac
import logging
import time
import zlib

from aiohttp import web

from tracescorer.metrics import Metrics
from tracescorer.receiver import status
from tracescorer.receiver.body import BodyLimits, BodyMalformed, BodyTooLarge, BodyTooSlow, ClientGone, read_body
from tracescorer.receiver.ingest import Encoding, Ingestor, IngestRefused, Signal, Ticket

log = logging.getLogger(__name__)
_MEDIA_TYPES = {"application/x-protobuf": Encoding.PROTOBUF, "application/json": Encoding.JSON}


def bearer_ok(header: str | None, token: str) -> bool:
    """Constant-time check of an ``Authorization: Bearer <token>`` header (no token = open)."""
    if not token:
        return True
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[7:].strip().encode(), token.encode())


# zlib window bits: gzip framing, or zlib framing with raw-deflate fallback ("deflate" in HTTP
# means zlib-wrapped, but some clients send raw deflate).
_WBITS = {"gzip": (16 + zlib.MAX_WBITS,), "deflate": (zlib.MAX_WBITS, -zlib.MAX_WBITS)}


def inflate(body: bytes, limit: int, encoding: str = "gzip") -> bytes:
    """Decompress a gzip/deflate body, refusing output beyond ``limit`` bytes (zip bombs)."""
    error: zlib.error | None = None
    for wbits in _WBITS[encoding]:
        inflater = zlib.decompressobj(wbits)
        try:
            out = inflater.decompress(body, limit + 1)
            break
        except zlib.error as exc:
            error = exc
    else:
        raise ValueError(f"invalid {encoding} body: {error}")
    if len(out) > limit or inflater.unconsumed_tail:
        raise OverflowError(f"decompressed body exceeds {limit} bytes")
    return out


#: Where the Langfuse SDK posts its OTLP (``{host}/api/public/otel/v1/traces``).
LANGFUSE_PREFIX = "/api/public/otel"


class _Arrival:
    """Called with each chunk of a request body as it arrives (see :func:`read_body`).

    The request takes its place among those in flight with its first body bytes (one that sends
    none holds nothing), refused then if its whole announced length would not fit; its bytes are
    reserved as they arrive, so a slow or chunked body holds what it sent, no more."""

    def __init__(self, ingestor: Ingestor, signal: Signal, announced: int) -> None:
        self._ingestor = ingestor
        self._signal = signal
        self._announced = announced
        self.ticket: Ticket | None = None

    def __call__(self, size: int) -> None:
        if self.ticket is None:
            self.ticket = self._ingestor.enter(self._signal, self._announced)
        self._ingestor.reserve(self._signal, self.ticket, size)


class OtlpHttpHandler:
    """aiohttp handlers for the OTLP/HTTP export endpoints."""

    def __init__(
        self,
        ingestor: Ingestor,
        metrics: Metrics,
        *,
        max_message_bytes: int,
        auth_token: str,
        body: BodyLimits | None = None,
    ) -> None:
        self._ingestor = ingestor
        self._metrics = metrics
        self._max = max_message_bytes
        self._token = auth_token
        self._body = body or BodyLimits(max_bytes=max_message_bytes)

    def routes(self) -> list[web.RouteDef]:
        return [
            route
            for prefix in ("", LANGFUSE_PREFIX)
            for route in (web.post(f"{prefix}/v1/traces", self.traces), web.post(f"{prefix}/v1/logs", self.logs))
        ]

    async def traces(self, request: web.Request) -> web.Response:
        return await self._handle(request, Signal.TRACES)

    async def logs(self, request: web.Request) -> web.Response:
        return await self._handle(request, Signal.LOGS)

    def _error(
        self,
        signal: Signal,
        encoding: Encoding,
        http_status: int,
        code: int,
        message: str,
        outcome: str,
        retry_after_s: int | None = None,
    ) -> web.Response:
        self._metrics.requests.labels("http", signal.value, outcome).inc()
        if encoding is Encoding.JSON:
            body, ctype = status.status_json(code, message), "application/json"
        else:
            body, ctype = status.status_protobuf(code, message, retry_after_s), "application/x-protobuf"
        headers = {"Retry-After": str(retry_after_s)} if retry_after_s is not None else {}
        return web.Response(status=http_status, body=body, content_type=ctype, headers=headers)

    async def _handle(self, request: web.Request, signal: Signal) -> web.Response:
        started = time.perf_counter()
        try:
            return await self._handle_inner(request, signal)
        finally:
            self._metrics.request_seconds.labels("http").observe(time.perf_counter() - started)

    async def _handle_inner(self, request: web.Request, signal: Signal) -> web.Response:
        encoding = _MEDIA_TYPES.get(request.content_type)
        reply_as = encoding or Encoding.PROTOBUF
        if not bearer_ok(request.headers.get("Authorization"), self._token):
            resp = self._error(
                signal, reply_as, 401, status.UNAUTHENTICATED, "missing or invalid bearer token", "unauthenticated"
            )
            resp.headers["WWW-Authenticate"] = "Bearer"
            return resp
        if encoding is None:
            return self._error(
                signal,
                reply_as,
                415,
                status.INVALID_ARGUMENT,
                f"unsupported content type {request.content_type!r}; use application/x-protobuf or application/json",
                "unsupported_media_type",
            )
        content_encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        if content_encoding not in ("identity", "gzip", "deflate", ""):
            return self._error(
                signal,
                encoding,
                415,
                status.INVALID_ARGUMENT,
                f"unsupported content encoding {content_encoding!r}",
                "unsupported_media_type",
            )
        if request.content_length is not None and request.content_length > self._max:
            return self._too_large(signal, encoding)
        arrival = _Arrival(self._ingestor, signal, request.content_length or 0)
        try:
            return await self._receive(request, signal, encoding, content_encoding, arrival)
        finally:
            if arrival.ticket is not None:
                self._ingestor.leave(arrival.ticket)

    async def _receive(
        self,
        request: web.Request,
        signal: Signal,
        encoding: Encoding,
        content_encoding: str,
        arrival: _Arrival,
    ) -> web.Response:
        try:
            body = await read_body(request.content, self._body, arrival)
        except IngestRefused as exc:
            return self._refused(signal, encoding, exc)
        except BodyTooLarge:
            return self._too_large(signal, encoding)
        except BodyTooSlow as exc:
            resp = self._error(
                signal,
                encoding,
                408,
                status.UNAVAILABLE,
                f"{exc} (receiver.body_timeout_s {self._body.timeout_s:g} + 1s per "
                f"receiver.min_body_bytes_per_s {self._body.min_bytes_per_s})",
                "body_timeout",
            )
            resp.force_close()
            return resp
        except BodyMalformed as exc:
            return self._error(signal, encoding, 400, status.INVALID_ARGUMENT, str(exc), "decode_error")
        except ClientGone:
            self._metrics.requests.labels("http", signal.value, "disconnected").inc()
            log.debug("client %s hung up before its %s request body was read", request.remote, signal.value)
            return web.Response(status=400)  # nobody reads it
        if content_encoding in _WBITS:
            try:
                body = inflate(body, self._max, content_encoding)
            except OverflowError:
                return self._too_large(signal, encoding)
            except ValueError as exc:
                return self._error(signal, encoding, 400, status.INVALID_ARGUMENT, str(exc), "decode_error")
        try:
            outcome = await self._ingestor.ingest(signal, encoding, body, arrival.ticket)
        except IngestRefused as exc:
            return self._refused(signal, encoding, exc)
        self._metrics.requests.labels("http", signal.value, "partial" if outcome.rejected else "ok").inc()
        if encoding is Encoding.JSON:
            return web.Response(body=status.export_response_json(signal, outcome), content_type="application/json")
        return web.Response(
            body=status.export_response_protobuf(signal, outcome), content_type="application/x-protobuf"
        )

    def _refused(self, signal: Signal, encoding: Encoding, exc: IngestRefused) -> web.Response:
        if exc.retryable:
            http_status = 429 if exc.reason == "backpressure" else 503
            return self._error(
                signal, encoding, http_status, status.UNAVAILABLE, str(exc), exc.reason, exc.retry_after_s
            )
        return self._error(signal, encoding, 400, status.INVALID_ARGUMENT, str(exc), exc.reason)

    def _too_large(self, signal: Signal, encoding: Encoding) -> web.Response:
        return self._error(
            signal, encoding, 413, status.INVALID_ARGUMENT, f"request body exceeds {self._max} bytes", "too_large"
        )
