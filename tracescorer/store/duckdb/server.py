"""The store process's entry point: ``python -m tracescorer.store.duckdb.server --fd N --options JSON``.

Started by :class:`~tracescorer.store.duckdb.process.StoreProcess`; serves the
:class:`~tracescorer.store.duckdb.engine.Engine` over the socket it inherits until ``close`` or the
end of the stream: a daemon that went away (killed, say) closes or resets its end, and what it
sent is committed as at a stop. With ``--attach-fd`` it also serves the channels the daemon
attaches for its workers (:mod:`tracescorer.store.duckdb.clients`); their end ends only them. The process then exits 0 once everything queued was committed,
1 otherwise. It ignores SIGINT/SIGTERM: the daemon decides when to stop. Files it creates are
0600 (folders 0700).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time

from tracescorer import logs
from tracescorer.ipc import BlockingChannel, enlarge_buffers
from tracescorer.runtime import tune_gc
from tracescorer.store.duckdb.clients import Clients
from tracescorer.store.duckdb.engine import Engine
from tracescorer.store.duckdb.wire import CLOSE, EngineOptions, Failure
from tracescorer.store.errors import disk_full

log = logging.getLogger("tracescorer.store.duckdb.engine")  # run as __main__ in the store process
#: what the commit of the queue and the checkpoint get at least, when attached clients took the deadline
SHUTDOWN_FLOOR_S = 2.0


def serve(sock: socket.socket, options: EngineOptions, attach_sock: socket.socket | None = None) -> bool:
    """Open the database, serve requests from ``sock`` (and channels attached over ``attach_sock``)
    until ``close`` or end of ``sock``'s stream; whether it opened and everything queued was committed."""
    enlarge_buffers(sock)
    chan = BlockingChannel(sock)
    clients = Clients(chan)

    try:
        engine = Engine(options, clients.reply)
    except Exception as exc:  # noqa: BLE001 - reported to the daemon, which names the file
        full = disk_full(options.path, exc)  # names the path and the free space itself
        failure = Failure("DiskFull", str(full)) if full else Failure("StoreError", f"{type(exc).__name__}: {exc}")
        chan.send((0, False, failure, {}))
        chan.close()
        return False
    chan.send((0, True, os.getpid(), {}))
    engine.start()
    if attach_sock is not None:
        clients.start_accepting(attach_sock, engine.dispatch)
    timeout_s = 30.0
    while (message := chan.recv()) is not None:
        req_id, kind, payload = message
        if kind == CLOSE:
            timeout_s = float(payload)
            break
        engine.dispatch(req_id, kind, payload)
    else:
        log.warning("the daemon went away: committing what it sent, then exiting")
    # its worker processes stop when it does (or when it went away): what they send meanwhile is
    # stored too, until they are gone; one deadline for both waits, as the daemon waits for one
    deadline = time.monotonic() + timeout_s
    if clients.attached and not clients.wait_detached(timeout_s):
        log.warning("%d worker process(es) still attached after %.1fs; stopping anyway", clients.attached, timeout_s)
    drained = engine.shutdown(max(SHUTDOWN_FLOOR_S, deadline - time.monotonic()))
    chan.send((-1, drained, None, {}))
    chan.close()
    return drained


def main(argv: list[str] | None = None) -> None:
    """``python -m tracescorer.store.duckdb.server --fd N --options JSON`` (started by StoreProcess)."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="tracescorer-store")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--attach-fd", type=int, default=None)
    parser.add_argument("--options", required=True)
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    # the daemon stops this process when it stops; a terminal's SIGHUP reaches the whole group
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    logs.configure(args.log_level, args.log_format)
    # the database files, their WALs and the spill folder are the daemon's alone: 0600 / 0700
    os.umask(0o077)
    tune_gc()  # the rows of every write are unpickled here: young passes over them, not full ones
    try:
        attach = None if args.attach_fd is None else socket.socket(fileno=args.attach_fd)
        ok = serve(socket.socket(fileno=args.fd), EngineOptions(**json.loads(args.options)), attach)
    except BaseException:  # the exit status says it; the log says why
        log.exception("the store process failed")
        ok = False
    log.info("store process exiting (%s)", "everything committed" if ok else "not everything committed")
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    # no interpreter teardown: a thread still inside DuckDB (a shutdown past its deadline) could
    # abort it; what was committed is in the WAL either way
    os._exit(0 if ok else 1)


if __name__ == "__main__":
    main()
