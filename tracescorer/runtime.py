"""Interpreter settings for the long-running processes (the daemon, its workers, its store process),
and the id a process claims work under."""

from __future__ import annotations

import gc
import os
import secrets
import socket


def default_owner() -> str:
    """This process's claim id: host, pid and a random part (a restarted daemon is a new owner)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def tune_gc() -> None:
    """Freeze what start-up loaded out of the collector's passes and make young passes rarer.

    The collector's full passes walk every live object, the modules loaded at start-up too: under
    load they ran ~25 times a minute at up to 90 ms each in the daemon, stalling its loop (measured
    with bench/sustained.py: GC 2.6 -> 0.45 s a minute, CPU per span -10 %). Call it once imports
    are done, before the work starts.
    """
    gc.freeze()
    gc.set_threshold(20_000, 20, 10)
