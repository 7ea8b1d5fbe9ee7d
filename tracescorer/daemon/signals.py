"""The signals ``serve`` handles on the event loop: SIGTERM and SIGINT stop it, SIGHUP reloads
its configuration (:mod:`tracescorer.daemon.reload`).

A terminal that closes sends SIGHUP to the job that ran ``serve &``: the daemon reloads (the file
unchanged: nothing changes) and keeps serving; the store and worker processes ignore it.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
RELOAD_SIGNAL = signal.SIGHUP


class StopSignals:
    """Handlers for :data:`STOP_SIGNALS` (and SIGHUP, calling ``reload``) on the running loop, from
    construction on; :meth:`wait` returns the first stop signal received (one received before it
    is called is kept). A SIGHUP before ``reload`` is set (the daemon still starting) is kept and
    handed to it when it is set."""

    def __init__(self) -> None:
        self._requested = asyncio.Event()
        self._received: list[signal.Signals] = []
        self._reload: Callable[[], None] | None = None
        self._hup_pending = False
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._on_signal, sig)
        loop.add_signal_handler(RELOAD_SIGNAL, self._on_hup)

    def on_reload(self, reload: Callable[[], None]) -> None:
        """Call ``reload`` at each SIGHUP from now on (and now, for one received before)."""
        self._reload = reload
        if self._hup_pending:
            self._hup_pending = False
            reload()

    def _on_hup(self) -> None:
        if self._reload is None:
            self._hup_pending = True
        else:
            self._reload()

    def _on_signal(self, sig: signal.Signals) -> None:
        self._received.append(sig)
        self._requested.set()

    async def wait(self) -> signal.Signals:
        await self._requested.wait()
        return self._received[0]
