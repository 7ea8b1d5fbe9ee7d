"""The daemon's HTTP servers (the OTLP/HTTP receiver, the ops API): a bound socket, TLS, an aiohttp
application behind the receivers' connection guard, and errors that name the listener."""

from __future__ import annotations

import logging
import socket
import ssl
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from tracescorer.metrics import Metrics
from tracescorer.receiver.connections import ConnectionGuard, ConnectionLimits, GuardedSite

#: the ops API's connections: few clients (CLI commands, probes), the receivers' timeouts
API_LIMITS = ConnectionLimits(max_connections=64)


class ListenError(OSError):
    """A listener could not bind; the message names the listener, the config key and the address."""


def bind_socket(host: str, port: int, what: str) -> socket.socket:
    """A bound, non-blocking TCP socket on ``host:port``; ``what`` names the listener in errors
    (e.g. ``"OTLP HTTP receiver (receiver.http)"``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise ListenError(exc.errno, f"{what}: cannot listen on {shown}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


def server_ssl_context(cert_file: Path | None, key_file: Path | None) -> ssl.SSLContext | None:
    """A server TLS context from a certificate and key, or None without them."""
    if cert_file is None or key_file is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    return context


class _ServerLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """aiohttp's server log: a malformed request (bad framing or headers) is the client's doing and
    costs it nothing to send, so it is logged at DEBUG, not as an ERROR traceback each time (a log
    flood); any other error stays an ERROR."""

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if level >= logging.ERROR and isinstance(kwargs.get("exc_info"), HttpProcessingError | ConnectionError):
            level = logging.DEBUG
        super().log(level, msg, *args, **kwargs)


_SERVER_LOG = _ServerLog(logging.getLogger("aiohttp.server"), {})


class HttpServer:
    """One aiohttp application on its own socket (a :class:`~tracescorer.lifecycle.Component`:
    ``start()`` binds and serves, ``port`` says where; ``stop(deadline)``). Its
    connections are kept by a :class:`ConnectionGuard` (cap, header and idle timeouts);
    ``runner_options`` go to aiohttp's ``AppRunner`` (``auto_decompress``, say)."""

    def __init__(
        self,
        app: web.Application,
        *,
        host: str,
        port: int,
        what: str,
        ssl_context: ssl.SSLContext | None = None,
        shutdown_timeout_s: float = 5.0,
        limits: ConnectionLimits = API_LIMITS,
        listener: str = "api",
        metrics: Metrics | None = None,
        **runner_options: Any,
    ) -> None:
        self.guard = ConnectionGuard(limits, listener=listener, metrics=metrics)
        app.middlewares.append(self.guard.middleware)
        # aiohttp's own keep-alive timer only backs the guard's up (which counts what it closes)
        self._runner = web.AppRunner(
            app,
            access_log=None,
            shutdown_timeout=shutdown_timeout_s,
            keepalive_timeout=limits.idle_timeout_s + 5.0,
            logger=_SERVER_LOG,
            **runner_options,
        )
        self._host, self._port, self._what = host, port, what
        self._ssl = ssl_context
        self._site: GuardedSite | None = None
        self.port = 0

    async def start(self) -> None:
        """Bind and serve (the bound port in :attr:`port`)."""
        sock = bind_socket(self._host, self._port, self._what)
        try:
            await self._runner.setup()
            self._site = GuardedSite(self._runner, sock, self.guard, what=self._what, ssl_context=self._ssl)
            await self._site.start()
        except BaseException:
            sock.close()
            raise
        self.port = int(sock.getsockname()[1])

    async def stop(self, deadline: float) -> bool:
        """Stop accepting, finish in-flight requests (within the runner's ``shutdown_timeout_s``),
        release the socket."""
        if self._site is None:
            return True  # never started (the bind failed)
        await self._site.stop()
        await self._runner.cleanup()
        self._site = None
        return True
