"""The signals that stop ``serve``: SIGTERM, SIGINT and SIGHUP, handled on the event loop.

SIGHUP (the terminal that ran ``serve &`` closed, or ``kill -HUP``) drains and stops like SIGTERM:
the configuration is not reloaded (restart to apply a change).
"""

from __future__ import annotations

import asyncio
import signal

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class StopSignals:
    """Handlers for :data:`STOP_SIGNALS` on the running loop, from construction on; :meth:`wait`
    returns the first one received (one received before it is called is kept)."""

    def __init__(self) -> None:
        self._requested = asyncio.Event()
        self._received: list[signal.Signals] = []
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        self._received.append(sig)
        self._requested.set()

    async def wait(self) -> signal.Signals:
        await self._requested.wait()
        return self._received[0]


def stop_note(sig: signal.Signals) -> str:
    """What the stop's log line adds for ``sig``: SIGHUP's stop is not a reload."""
    return "; SIGHUP stops like SIGTERM, it does not reload the configuration" if sig == signal.SIGHUP else ""
