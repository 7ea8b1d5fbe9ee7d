"""The store process's attached channels (real sockets, the real attach path): a channel attached
while an ended one (a killed worker's) still has requests unanswered is greeted only once they are
answered, so the worker started in its place reads what its predecessor sent, committed."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from tracescorer.ipc import BlockingChannel
from tracescorer.store.duckdb.clients import TAG_BITS, Clients


def _attach(attach: socket.socket) -> socket.socket:
    theirs, ours = socket.socketpair()
    socket.send_fds(attach, [b"a"], [theirs.fileno()])
    theirs.close()
    return ours


def test_a_channel_attached_while_an_ended_one_has_requests_unanswered_waits_for_them():
    main_ours, main_theirs = socket.socketpair()
    attach_ours, attach_theirs = socket.socketpair()
    clients = Clients(BlockingChannel(main_theirs))
    dispatched: list[int] = []
    arrived = threading.Condition()

    def dispatch(req_id: int, kind: str, payload: Any) -> None:
        with arrived:
            dispatched.append(req_id)
            arrived.notify_all()

    clients.start_accepting(attach_theirs, dispatch)
    try:
        # a worker: greeted, sends a write, and is killed before its answer
        first = BlockingChannel(_attach(attach_ours))
        assert first.recv()[1] is True  # the hello
        first.send((1, "write", None))
        with arrived:
            assert arrived.wait_for(lambda: len(dispatched) == 1, 10)
        first.close()
        deadline = time.monotonic() + 10
        while clients.attached:  # its reader saw the end
            assert time.monotonic() < deadline
            time.sleep(0.01)

        # the worker started in its place attaches: not greeted while the write is unanswered
        second = BlockingChannel(_attach(attach_ours))
        greeted = threading.Event()
        threading.Thread(target=lambda: second.recv() is not None and greeted.set(), daemon=True).start()
        assert not greeted.wait(0.3)
        clients.reply(dispatched[0], True, None, {})  # committed: dropped, its channel is gone
        assert greeted.wait(10)
        second.send((1, "read", None))
        with arrived:
            assert arrived.wait_for(lambda: len(dispatched) == 2, 10)
        assert dispatched[1] >> TAG_BITS == (dispatched[0] >> TAG_BITS) + 1 and dispatched[1] & 0xFFFF == 1
        second.close()
    finally:
        for s in (main_ours, attach_ours):
            s.close()
