"""The store process's entry point: ``python -m tracescorer.store.duckdb.server --fd N --options JSON``.

Started by :class:`~tracescorer.store.duckdb.process.StoreProcess`; serves the
:class:`~tracescorer.store.duckdb.engine.Engine` over the socket it inherits until ``close`` or the
end of the stream. The process ignores SIGINT/SIGTERM: the daemon decides when to stop.
"""

from __future__ import annotations

import os
import signal
import socket
from typing import Any

from tracescorer import logs
from tracescorer.store.duckdb.engine import Engine
from tracescorer.store.duckdb.ipc import BlockingChannel, enlarge_buffers
from tracescorer.store.duckdb.wire import CLOSE, EngineOptions, Failure


def serve(sock: socket.socket, options: EngineOptions) -> None:
    """Open the database, serve requests from ``sock`` until ``close`` or end of stream."""
    enlarge_buffers(sock)
    chan = BlockingChannel(sock)

    def reply(req_id: int, ok: bool, value: Any, meta: dict[str, Any]) -> None:
        chan.send((req_id, ok, value, meta))

    try:
        engine = Engine(options, reply)
    except Exception as exc:  # noqa: BLE001 - reported to the daemon, which names the file
        chan.send((0, False, Failure("StoreError", f"{type(exc).__name__}: {exc}"), {}))
        chan.close()
        return
    chan.send((0, True, os.getpid(), {}))
    engine.start()
    timeout_s = 30.0
    while (message := chan.recv()) is not None:
        req_id, kind, payload = message
        if kind == CLOSE:
            timeout_s = float(payload)
            break
        engine.dispatch(req_id, kind, payload)
    drained = engine.shutdown(timeout_s)
    chan.send((-1, drained, None, {}))
    chan.close()


def main(argv: list[str] | None = None) -> None:
    """``python -m tracescorer.store.duckdb.server --fd N --options JSON`` (started by StoreProcess)."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="tracescorer-store")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--options", required=True)
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    # the daemon stops this process when it stops; a terminal's SIGHUP reaches the whole group
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    logs.configure(args.log_level, args.log_format)
    serve(socket.socket(fileno=args.fd), EngineOptions(**json.loads(args.options)))


if __name__ == "__main__":
    main()
