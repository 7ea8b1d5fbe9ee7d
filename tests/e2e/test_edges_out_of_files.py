"""Out of file descriptors with idle connections (issue 52): when accept() fails for want of a
descriptor, the HTTP listener closes its least recently active idle connection (idle for
``EVICT_IDLE_S`` at least) and takes the new client, rather than backing off until an idle
connection times out."""

from __future__ import annotations

import socket

from support import lone_listener


def test_out_of_files_the_oldest_idle_connection_makes_room(tmp_path):
    with open(tmp_path / "listener.log", "wb") as log:
        proc, port = lone_listener.start(log)
    idle: list[socket.socket] = []
    try:
        assert proc.stdout is not None and proc.stdin is not None
        # as many silent connections as it may open descriptors (the listener's cap is far above)
        idle = [socket.create_connection(("127.0.0.1", port), timeout=20) for _ in range(8)]
        with socket.create_connection(("127.0.0.1", port), timeout=20) as client:
            client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert client.recv(4096).startswith(b"HTTP/1.1 200")  # served once the oldest was closed
        assert idle[0].recv(1) == b""  # the oldest idle connection: closed for it
        idle[-1].setblocking(False)
        try:
            idle[-1].recv(1)
            raise AssertionError("the newest idle connection was closed")
        except BlockingIOError:
            pass  # the newest: still open
        proc.stdin.close()
        proc.stdout.readline()
        assert proc.wait(20) == 0
    finally:
        for sock in idle:
            sock.close()
        if proc.poll() is None:
            proc.kill()
    text = (tmp_path / "listener.log").read_text()
    assert "Traceback" not in text, text
