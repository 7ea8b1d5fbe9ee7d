"""The store process's clients: the daemon's channel, and the channels attached to it since.

The daemon's worker processes talk to the store process directly, each over a channel of its
own. The daemon makes a socketpair per worker (:meth:`~tracescorer.store.duckdb.process.StoreProcess.attach`)
and sends one end to the store process over the *attach socket*, a second socketpair made when
the store process was started (``SCM_RIGHTS``: :func:`socket.send_fds`). Here a thread receives
those ends (:meth:`Clients.accept`) and a reader thread per attached channel dispatches its
requests to the one :class:`~tracescorer.store.duckdb.engine.Engine`.

Request ids are tagged with their channel (``channel << 40 | id``; the daemon's channel is 0, so
its ids are unchanged) and :meth:`Clients.reply` sends each answer back on the channel its request
came on, untagged; the answers of a channel that went away are dropped. An attached channel
that ends (its worker exited or was killed) ends only itself: what it sent is committed as
usual, and the store process goes on serving everyone else. Only the daemon's channel stops the
process (:mod:`tracescorer.store.duckdb.server`).

A channel attached while an ended one still has requests unanswered (a killed worker's writes,
queued behind others) is greeted only once they are answered (committed or failed), up to
:data:`DRAIN_S`: the worker started in its place reads the store as its predecessor left it, so
it does not take the traces it had assembled, whose records were still queued, for new.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from tracescorer.ipc import BlockingChannel, enlarge_buffers
from tracescorer.store.duckdb.wire import CLOSE

log = logging.getLogger("tracescorer.store.duckdb.engine")  # run in the store process

TAG_BITS = 40
MAIN = 0
_LOCAL = (1 << TAG_BITS) - 1
#: the longest a new channel waits for an ended one's requests (a bound, should the engine stall)
DRAIN_S = 60.0

Dispatch = Callable[[int, str, Any], None]


class Clients:
    """The channels the store process serves, by tag (see the module docstring)."""

    def __init__(self, main: BlockingChannel) -> None:
        self._channels: dict[int, BlockingChannel] = {MAIN: main}
        self._lock = threading.Lock()
        self._tags = itertools.count(MAIN + 1)
        # notified when an attached channel ends, and when an ended one's last request is answered
        self._gone = threading.Condition(self._lock)
        self._unanswered: dict[int, int] = {}  # attached tag -> its requests not answered yet
        self._draining: set[int] = set()  # ended channels with requests not answered yet

    def reply(self, req_id: int, ok: bool, value: Any, meta: dict[str, Any]) -> None:
        """Send an answer back on the channel its request came on (dropped when it is gone)."""
        tag = req_id >> TAG_BITS
        with self._lock:
            channel = self._channels.get(tag)
            n = self._unanswered.get(tag)
            if n is not None and (n > 1 or tag not in self._draining):
                self._unanswered[tag] = n - 1
            elif n is not None:  # an ended channel's last request
                del self._unanswered[tag]
                self._draining.discard(tag)
                self._gone.notify_all()
        if channel is not None:
            channel.send((req_id & _LOCAL, ok, value, meta))

    @property
    def attached(self) -> int:
        """How many attached channels are open."""
        with self._lock:
            return len(self._channels) - 1

    def start_accepting(self, sock: socket.socket, dispatch: Dispatch) -> None:
        threading.Thread(target=self.accept, args=(sock, dispatch), name="store-attach", daemon=True).start()

    def accept(self, sock: socket.socket, dispatch: Dispatch) -> None:
        """Receive channel ends over ``sock`` and serve each, until the daemon closes its end."""
        sock.setblocking(True)
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(sock, 64, 16)
            except OSError:
                return
            if not message and not fds:
                return  # the daemon closed its end: it is stopping or gone
            for fd in fds:
                try:
                    self._serve(socket.socket(fileno=fd), dispatch)
                except OSError as exc:
                    log.warning("cannot serve an attached channel: %s", exc)

    def _serve(self, sock: socket.socket, dispatch: Dispatch) -> None:
        enlarge_buffers(sock)
        channel = BlockingChannel(sock)
        with self._gone:
            if not self._gone.wait_for(lambda: not self._draining, DRAIN_S):
                log.warning("attached channel(s) %s still have requests unanswered; serving a new one", self._draining)
            tag = next(self._tags)
            self._channels[tag] = channel
        # the same hello the daemon gets: the client knows the database is open before it asks
        channel.send((0, True, os.getpid(), {}))
        threading.Thread(
            target=self._read, args=(tag, channel, dispatch), name=f"store-client-{tag}", daemon=True
        ).start()
        log.debug("serving attached channel %d", tag)

    def _read(self, tag: int, channel: BlockingChannel, dispatch: Dispatch) -> None:
        while (message := channel.recv()) is not None:
            req_id, kind, payload = message
            if kind == CLOSE:
                break  # an attached client does not stop the store: it only ends its channel
            with self._lock:
                self._unanswered[tag] = self._unanswered.get(tag, 0) + 1
            dispatch(tag << TAG_BITS | req_id, kind, payload)
        with self._lock:
            self._channels.pop(tag, None)
            if self._unanswered.get(tag, 0) > 0:
                self._draining.add(tag)
            else:
                self._unanswered.pop(tag, None)
            self._gone.notify_all()
        channel.close()
        log.debug("an attached client went away (channel %d); what it sent is committed", tag)

    def wait_detached(self, timeout_s: float) -> bool:
        """Wait (up to ``timeout_s``) until no attached channel is open; whether none is."""
        with self._gone:
            return self._gone.wait_for(lambda: len(self._channels) <= 1, timeout_s)
