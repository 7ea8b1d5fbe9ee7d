"""Shared plumbing of the fake trace-backend servers (Phoenix, MLflow): a real aiohttp server on
``127.0.0.1:0`` in a background thread, every request recorded, failures scripted per path."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = ["BackendServer", "Failure", "Recorded"]


@dataclass(frozen=True, kw_only=True)
class Recorded:
    """One request as received (``json`` is the parsed body, None when there was none)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    json: Any
    status: int


@dataclass(kw_only=True)
class Failure:
    """Answer the next ``remaining`` requests matching ``method`` and ``path`` (a regex) with this."""

    method: str
    path: str
    remaining: int
    status: int
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    disconnect: bool = False


Handler = Callable[[web.Request, Any], Awaitable[web.Response]]


class BackendServer:
    """Base of the fakes: subclasses register routes in :meth:`routes` and hold their state
    under ``self.lock``."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.requests: list[Recorded] = []
        self._failures: list[Failure] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    def routes(self) -> list[tuple[str, str, Handler]]:
        raise NotImplementedError

    # --- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        started = threading.Event()
        errors: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._serve, args=(started, errors), name=type(self).__name__, daemon=True
        )
        self._thread.start()
        started.wait(10)
        if errors or not self.port:
            raise RuntimeError(f"{type(self).__name__} did not start: {errors}")

    def stop(self) -> None:
        loop, runner = self._loop, self._runner
        if loop is not None and runner is not None and loop.is_running():
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def _serve(self, started: threading.Event, errors: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            app = web.Application()
            for method, path, handler in self.routes():
                app.router.add_route(method, path, self._wrap(handler))
            runner = web.AppRunner(app, access_log=None)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            self._runner = runner
            self.port = runner.addresses[0][1]
        except BaseException as exc:  # reported to start()
            errors.append(exc)
            started.set()
            return
        started.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    def _wrap(self, handler: Handler) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def run(request: web.Request) -> web.StreamResponse:
            raw = await request.read()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                return self._log(request, None, web.json_response({"detail": "body is not JSON"}, status=422))
            failure = self._take_failure(request.method, request.path)
            if failure is not None:
                if failure.disconnect:
                    with self.lock:
                        self.requests.append(
                            Recorded(
                                method=request.method,
                                path=request.path,
                                query=dict(request.query),
                                headers=dict(request.headers),
                                json=body,
                                status=0,
                            )
                        )
                        self.lock.notify_all()
                    assert request.transport is not None
                    request.transport.close()
                    raise ConnectionResetError
                response = (
                    web.json_response(failure.body, status=failure.status, headers=dict(failure.headers))
                    if failure.body is not None
                    else web.Response(status=failure.status, headers=dict(failure.headers))
                )
                return self._log(request, body, response)
            return self._log(request, body, await handler(request, body))

        return run

    def _log(self, request: web.Request, body: Any, response: web.Response) -> web.Response:
        with self.lock:
            self.requests.append(
                Recorded(
                    method=request.method,
                    path=request.path,
                    query=dict(request.query),
                    headers={k.lower(): v for k, v in request.headers.items()},
                    json=body,
                    status=response.status,
                )
            )
            self.lock.notify_all()
        return response

    # --- scripting and inspection ------------------------------------------------------------

    def fail_next(
        self,
        n: int,
        status: int,
        *,
        method: str = ".*",
        path: str = ".*",
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        disconnect: bool = False,
    ) -> None:
        """Answer the next ``n`` requests matching ``method``/``path`` (regexes) with ``status``."""
        with self.lock:
            self._failures.append(
                Failure(
                    method=method,
                    path=path,
                    remaining=n,
                    status=status,
                    body=body,
                    headers=dict(headers or {}),
                    disconnect=disconnect,
                )
            )

    def clear_failures(self) -> None:
        with self.lock:
            self._failures.clear()

    def _take_failure(self, method: str, path: str) -> Failure | None:
        with self.lock:
            for failure in self._failures:
                if failure.remaining > 0 and re.fullmatch(failure.method, method) and re.fullmatch(failure.path, path):
                    failure.remaining -= 1
                    return failure
        return None

    def recorded(self, method: str | None = None, path: str | None = None) -> list[Recorded]:
        with self.lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method) and (path is None or re.fullmatch(path, r.path))
            ]

    def wait_for(self, predicate: Callable[[], Any], timeout_s: float = 10.0, what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout_s
        with self.lock:
            while True:
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"waited {timeout_s:g}s for {what}; {len(self.requests)} requests so far")
                self.lock.wait(remaining)
