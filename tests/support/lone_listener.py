"""A lone HttpServer (the receivers' connection handling) under a small open-files limit, for the
accept tests (:func:`start` runs it): ``python -m support.lone_listener FREE`` prints its port,
lets FREE more descriptors be opened, and serves until its stdin closes, printing its
accept-error count for each line read and once more at the end."""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from aiohttp import web

from tracescorer.http_server import HttpServer
from tracescorer.metrics import Metrics
from tracescorer.receiver import fdlimit
from tracescorer.receiver.connections import ConnectionLimits


def start(log: IO[bytes], free: int = 8) -> tuple[subprocess.Popen[bytes], int]:
    """This module as a process (its log to ``log``, ``free`` descriptors to open) and its port."""
    tests = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "support.lone_listener", str(free)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        cwd=str(tests.parent),
        env={**os.environ, "PYTHONPATH": str(tests)},
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


async def main(free: int) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    metrics = Metrics()

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_get("/", hello)
    limits = ConnectionLimits(max_connections=10_000, header_timeout_s=60, idle_timeout_s=120)
    listener = HttpServer(
        app, host="127.0.0.1", port=0, what="lone listener", limits=limits, listener="http", metrics=metrics
    )
    await listener.start()
    port = listener.port
    used = fdlimit.open_files()
    assert used is not None
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (used + free, hard))
    print(port, flush=True)

    def errors() -> int:
        return int(metrics.accept_errors.labels("http")._value.get())

    while await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline):
        print(errors(), flush=True)
    counted = errors()
    await listener.stop(time.monotonic() + 5)
    print(counted, flush=True)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
