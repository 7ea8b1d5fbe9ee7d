"""Clients for the edge drills: raw sockets that idle, trickle headers or bodies, or hang up; and
an OTel SDK exporter that reports each export's result (the normal client beside them)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from support.otlp import span_exporter

Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def post_head(
    path: str = "/v1/traces", *, content_length: int | None = None, chunked: bool = False, extra: str = ""
) -> bytes:
    """The request line and headers of an OTLP/HTTP protobuf POST (the body not included)."""
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/x-protobuf"]
    if content_length is not None:
        lines.append(f"Content-Length: {content_length}")
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    if extra:
        lines.append(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked body (``b""`` gives the last one)."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def connect(port: int, first: bytes = b"") -> Conn:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    if first:
        writer.write(first)
        await writer.drain()
    return reader, writer


async def closed_by_peer(conn: Conn, timeout_s: float) -> bool:
    """Read (and drop) what the peer sends until it closes the connection: True, or False at the deadline."""
    reader, _ = conn
    try:
        async with asyncio.timeout(timeout_s):
            while await reader.read(65536):
                pass
    except TimeoutError:
        return False
    except OSError:  # reset: closed too
        pass
    return True


async def read_status(conn: Conn, timeout_s: float) -> tuple[int, bytes]:
    """The status code and body of the HTTP response the connection gets next."""
    reader, _ = conn
    async with asyncio.timeout(timeout_s):
        head = await reader.readuntil(b"\r\n\r\n")
        found = re.search(rb"\r\nContent-Length: (\d+)", head, re.I)
        body = await reader.readexactly(int(found.group(1))) if found else b""
    return int(head.split(b" ", 2)[1]), body


def close(conns: list[Conn]) -> None:
    for _, writer in conns:
        with contextlib.suppress(Exception):
            writer.transport.abort()


async def trickle(conn: Conn, data: bytes, stop: asyncio.Event, interval_s: float = 1.0) -> None:
    """Send ``data`` a byte every ``interval_s`` until it is sent, ``stop`` is set or the peer closes."""
    _, writer = conn
    for i in range(len(data)):
        if stop.is_set() or writer.is_closing():
            return
        try:
            writer.write(data[i : i + 1])
            await writer.drain()
        except OSError:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(interval_s):
                await stop.wait()


class Sender:
    """An OTel SDK span exporter (gRPC or HTTP) whose every export's result is kept: ``send()``
    exports one span (blocking: call it from a thread) and returns whether it was acknowledged;
    ``options`` go to the exporter (TLS credentials, say)."""

    def __init__(
        self, transport: str, *, grpc_endpoint: str = "", http_url: str = "", timeout_s: float = 10, **options: Any
    ) -> None:
        self.transport = transport
        self._exporter = span_exporter(
            transport, grpc_endpoint=grpc_endpoint, http_url=http_url, timeout=timeout_s, **options
        )
        self._memory = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": f"edges-{transport}"}))
        provider.add_span_processor(SimpleSpanProcessor(self._memory))
        self._tracer = provider.get_tracer("tests.edges")
        self._lock = threading.Lock()
        self.results: list[SpanExportResult] = []

    def send(self, **attributes: Any) -> bool:
        with self._lock:
            with self._tracer.start_as_current_span(f"edge {self.transport}", attributes=attributes):
                pass
            spans = self._memory.get_finished_spans()
            self._memory.clear()
            result = self._exporter.export(spans)
            self.results.append(result)
            return result is SpanExportResult.SUCCESS

    @property
    def acknowledged(self) -> int:
        return sum(r is SpanExportResult.SUCCESS for r in self.results)

    def shutdown(self) -> None:
        self._exporter.shutdown()
