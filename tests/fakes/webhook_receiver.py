"""A real local HTTP server that receives webhook POSTs (for the monitor tests).

Records every request (path, headers, JSON body) and answers 200, or what was scripted for a
path: ``fail(path, times, status)`` answers ``status`` that many times first; ``hang(path,
seconds, times)`` delays that many answers (to drive client timeouts).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: Any
    status: int  # what the server answered
    at: float


class WebhookReceiver:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self._fail: dict[str, list[int]] = {}
        self._hang: dict[str, list[float]] = {}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                with receiver._lock:
                    statuses = receiver._fail.get(self.path)
                    status = statuses.pop(0) if statuses else 200
                    delays = receiver._hang.get(self.path)
                    delay = delays.pop(0) if delays else 0.0
                if delay:
                    time.sleep(delay)
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
                with receiver._lock:
                    receiver.requests.append(
                        Received(self.path, dict(self.headers.items()), body, status, time.monotonic())
                    )
                payload = b"ok" if status == 200 else b"nope"
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def log_message(self, format: str, *args: Any) -> None:  # signature of the base
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="webhook-receiver", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def fail(self, path: str, times: int, status: int = 500) -> None:
        with self._lock:
            self._fail[path] = [status] * times

    def hang(self, path: str, seconds: float, times: int = 1) -> None:
        with self._lock:
            self._hang[path] = [seconds] * times

    def at(self, path: str) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
