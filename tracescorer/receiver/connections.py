"""Connections at an aiohttp listener: an accept loop of our own, a cap, header and idle timeouts.

Why not aiohttp's ``SockSite``: it accepts through asyncio's ``create_server``, which has no cap,
and whose accept loop (CPython 3.11) on EMFILE logs a traceback and schedules a retry for every
attempt of the same tick: with the open-files limit reached, 1,000 idle clients made it log 512k
tracebacks a minute and burn 61% of a core, and no new client got in. aiohttp's own
``keepalive_timeout`` closes a connection that waits for its next request, but counts from the
last response, so it cannot be both short for headers and long for keep-alive.

Here :class:`GuardedSite` accepts with ``loop.sock_accept`` and hands each socket to aiohttp's
protocol through ``connect_accepted_socket``, behind a thin :class:`_Connection` that sees when a
request's first bytes arrive. :class:`ConnectionGuard` keeps the connections: one that has not
sent complete headers ``header_timeout_s`` after it was accepted (or after the first byte of its
next request) is closed, as is one with no request in flight for ``idle_timeout_s``. At
``max_connections``, or when accept() finds no file descriptor left (then among those idle for
:data:`EVICT_IDLE_S`), the least recently active idle connection is closed to make room (an
HTTP/1.1 server may close an idle keep-alive connection at any time; clients open a new one); a
connection still in its TLS handshake is idle since it was accepted. Only when every connection
is busy is a new one answered 503. Other accept() errors, and running out of descriptors with
nothing to evict, back off (50 ms doubling to 1 s) and are logged once per streak, with its count
when it ends.

Why handshakes count as idle: they were invisible to the cap's eviction, so with TLS on, 1,010
clients that connected and sent nothing filled the cap with handshakes until
``header_timeout_s``, and every new client was refused meanwhile (an OTLP/HTTP export took
8.9-16 s through the SDK's retries; 0.8 s unhindered).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from tracescorer.metrics import Metrics

log = logging.getLogger(__name__)

ACCEPT_BACKOFF_S = 0.05
ACCEPT_BACKOFF_MAX_S = 1.0
STREAK_REMINDER_S = 60.0  # a streak of accept errors is logged again this often while it lasts
STREAK_QUIET_S = 2.0  # a streak ends once accept() has worked this long without a failure
# out of descriptors, a connection idle this long is closed for a new one (a younger one may be
# about to send its request: evicting it would only trade one new client for another)
EVICT_IDLE_S = 2.0
_REFUSAL = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
_OUT_OF_FILES = frozenset({errno.EMFILE, errno.ENFILE})


@dataclass(frozen=True, kw_only=True, slots=True)
class ConnectionLimits:
    """``receiver.max_connections``, ``header_timeout_s``, ``idle_timeout_s`` for one listener."""

    max_connections: int = 1024
    header_timeout_s: float = 10.0
    idle_timeout_s: float = 60.0


class _Connection(asyncio.Protocol):
    """Between a transport and aiohttp's protocol: notes when the next request's bytes start."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self._guard = guard
        self.inner = inner
        self.transport: asyncio.BaseTransport | None = None
        now = guard.now()
        self.since = now  # accepted, or its last request answered
        self.header_deadline: float | None = now + guard.limits.header_timeout_s
        self.busy = False
        self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self._guard.made(self)
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.header_deadline is None and not self.busy:
            self.header_deadline = self._guard.now() + self._guard.limits.header_timeout_s
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._guard.lost(self)
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def close(self, reason: str) -> None:
        if self.closing or self.transport is None:
            return
        self.closing = True
        self._guard.closed(reason)
        self._guard.closing += 1
        # a client that stalls its headers gets no graceful close; an evicted connection's descriptor
        # is wanted now (a TLS close would hold it until the peer's close_notify)
        if reason in ("header_timeout", "evicted") and isinstance(self.transport, asyncio.Transport):
            self.transport.abort()
        else:
            self.transport.close()


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ConnectionGuard:
    """The connections of one listener, their timeouts and cap; ``listener`` labels its metrics."""

    def __init__(self, limits: ConnectionLimits, *, listener: str, metrics: Metrics | None = None) -> None:
        self.limits = limits
        self.listener = listener
        self._metrics = metrics
        self._connections: dict[asyncio.BaseTransport, _Connection] = {}
        # accepted, not connected yet (a TLS handshake): when accepted, oldest first
        self._handshakes: dict[asyncio.Task[None], float] = {}
        self._busy = 0
        self.closing = 0  # connections closed and not gone yet (their descriptors are freed next)
        self._loop: asyncio.AbstractEventLoop | None = None
        if metrics is not None:
            metrics.connections.labels(listener).set_function(lambda: self.open)

    def now(self) -> float:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop.time()

    @property
    def open(self) -> int:
        return len(self._connections) + len(self._handshakes)

    @property
    def busy(self) -> int:
        """Connections with a request being handled."""
        return self._busy

    def saturated(self) -> str | None:
        """Why a new connection would be refused now (None while it would be taken)."""
        if self._busy >= self.limits.max_connections:
            return (
                f"{self.open} connections open, none idle ({self.listener} listener at "
                f"receiver.max_connections {self.limits.max_connections})"
            )
        return None

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Marks the request's connection busy while it is handled (installed on the application)."""
        transport = request.transport
        conn = self._connections.get(transport) if transport is not None else None
        if conn is None:
            return await handler(request)
        conn.busy, conn.header_deadline = True, None
        self._busy += 1
        try:
            return await handler(request)
        finally:
            conn.busy = False
            self._busy -= 1
            conn.since = self.now()

    def made(self, conn: _Connection) -> None:
        if conn.transport is not None:
            self._connections[conn.transport] = conn

    def lost(self, conn: _Connection) -> None:
        if conn.transport is not None and self._connections.pop(conn.transport, None) is not None and conn.closing:
            self.closing -= 1

    def closed(self, reason: str) -> None:
        if self._metrics is not None:
            self._metrics.connections_closed.labels(self.listener, reason).inc()

    def make_room(self) -> bool:
        """At the cap, close the least recently active idle connection; False when every one is busy."""
        if self.open - self.closing < self.limits.max_connections:
            return True
        return self.evict()

    def evict(self, idle_for_s: float = 0.0) -> bool:
        """Close the least recently active idle connection, or handshake (idle since it was
        accepted), if idle for ``idle_for_s`` at least; False when there is none."""
        before = self.now() - idle_for_s
        idle = [c for c in self._connections.values() if not c.busy and not c.closing and c.since <= before]
        oldest = min(idle, key=lambda c: c.since, default=None)
        handshake = next(((t, at) for t, at in self._handshakes.items() if not t.done() and at <= before), None)
        if handshake is not None and (oldest is None or handshake[1] <= oldest.since):
            task = handshake[0]
            del self._handshakes[task]
            task.cancel()  # the socket is closed as the task ends (see GuardedSite._admit)
            self.closed("evicted")
            return True
        if oldest is None:
            return False
        oldest.close("evicted")
        return True

    def sweep(self) -> None:
        """Close the connections past their header or idle timeout."""
        now = self.now()
        idle_before = now - self.limits.idle_timeout_s
        for conn in list(self._connections.values()):
            if conn.busy or conn.closing:
                continue
            if conn.header_deadline is not None and now >= conn.header_deadline:
                conn.close("header_timeout")
            elif conn.since <= idle_before:
                conn.close("idle_timeout")

    async def sweep_loop(self) -> None:
        interval = min(1.0, self.limits.header_timeout_s / 4)
        while True:
            await asyncio.sleep(interval)
            self.sweep()

    def accept_failed(self) -> None:
        if self._metrics is not None:
            self._metrics.accept_errors.labels(self.listener).inc()

    def handshaking(self, task: asyncio.Task[None]) -> None:
        """``task`` sets up an accepted connection (its TLS handshake) until it ends."""
        self._handshakes[task] = self.now()
        task.add_done_callback(lambda done: self._handshakes.pop(done, None))


class _AcceptStreak:
    """accept() failures in a row, logged when they start and, with their count, once accept()
    has worked for :data:`STREAK_QUIET_S` (descriptors freed one at a time are taken at once, so
    a streak flickers: it is one streak until it has been quiet)."""

    def __init__(self, what: str, guard: ConnectionGuard) -> None:
        self._what = what
        self._guard = guard
        self._failures = 0
        self._first = self._reminded = 0.0
        self._backoff = ACCEPT_BACKOFF_S
        self._end: asyncio.TimerHandle | None = None

    def failed(self, exc: OSError) -> float:
        """Count a failure; the seconds to wait before the next attempt."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._end is not None:
            self._end.cancel()
            self._end = None
        if not self._failures:
            self._first = self._reminded = now
            log.warning(
                "%s: cannot accept connections: %s (%d open here%s); retrying with backoff, logged again when "
                "it accepts",
                self._what,
                exc,
                self._guard.open,
                ": out of file descriptors, see tracescorer_open_files_headroom" if exc.errno in _OUT_OF_FILES else "",
            )
        elif now - self._reminded >= STREAK_REMINDER_S:
            self._reminded = now
            log.warning(
                "%s: accept() still failing: %d attempts over %.0fs", self._what, self._failures, now - self._first
            )
        self._failures += 1
        self._guard.accept_failed()
        wait, self._backoff = self._backoff, min(ACCEPT_BACKOFF_MAX_S, self._backoff * 2)
        return wait

    def accepted(self) -> None:
        self._backoff = ACCEPT_BACKOFF_S
        if self._failures and self._end is None:
            self._end = asyncio.get_running_loop().call_later(STREAK_QUIET_S, self._ended)

    def _ended(self) -> None:
        self._end = None
        log.warning(
            "%s: accepting connections again after %d failed accept() calls over %.1fs",
            self._what,
            self._failures,
            asyncio.get_running_loop().time() - self._first,
        )
        self._failures = 0


class GuardedSite(web.BaseSite):
    """An aiohttp site on a bound socket whose connections a :class:`ConnectionGuard` keeps."""

    def __init__(
        self,
        runner: web.BaseRunner,
        sock: socket.socket,
        guard: ConnectionGuard,
        *,
        what: str,
        ssl_context: ssl.SSLContext | None = None,
        backlog: int = 1024,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self._sock = sock
        self._guard = guard
        self._what = what
        self._tasks: set[asyncio.Task[None]] = set()
        self._loops: list[asyncio.Task[None]] = []

    @property
    def name(self) -> str:
        host, port = self._sock.getsockname()[:2]
        return f"{'https' if self._ssl_context else 'http'}://{host}:{port}"

    async def start(self) -> None:
        await super().start()
        self._sock.listen(self._backlog)
        self._loops = [
            asyncio.create_task(self._accept_loop(), name=f"accept {self._guard.listener}"),
            asyncio.create_task(self._guard.sweep_loop(), name=f"sweep {self._guard.listener}"),
        ]

    async def stop(self) -> None:
        for task in self._loops:
            task.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        self._loops = []
        self._sock.close()
        await super().stop()

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        streak = _AcceptStreak(self._what, self._guard)
        while True:
            try:
                sock, _ = await loop.sock_accept(self._sock)
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                continue
            except OSError as exc:
                if exc.errno in _OUT_OF_FILES and self._guard.evict(EVICT_IDLE_S):
                    self._guard.accept_failed()
                    await asyncio.sleep(0)  # the evicted connection's descriptor is freed as the loop turns
                    continue
                await asyncio.sleep(streak.failed(exc))
                continue
            streak.accepted()
            self._admit(sock)

    def _admit(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        if not self._guard.make_room():
            self._guard.closed("refused")
            if self._ssl_context is None:
                try:
                    sock.send(_REFUSAL)
                except OSError:
                    pass  # the client is gone already: nothing to tell it
            sock.close()
            return
        task = asyncio.create_task(self._connect(sock))
        # evicted in its handshake: the transport is closed if there was one, the socket in any case
        task.add_done_callback(lambda done: sock.close() if done.cancelled() else None)
        self._guard.handshaking(task)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect(self, sock: socket.socket) -> None:
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        guard = self._guard
        try:
            await loop.connect_accepted_socket(
                lambda: _Connection(guard, server()),
                sock,
                ssl=self._ssl_context,
                ssl_handshake_timeout=guard.limits.header_timeout_s if self._ssl_context else None,
            )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            log.debug("%s: connection dropped before it was set up: %s", self._what, exc)
            sock.close()
