"""accept() errors at an HTTP listener (issue 39): out of file descriptors, the listener backs off
and logs the streak once, then once more with its count when it accepts again; it does not spin."""

from __future__ import annotations

import socket
import time

from support import lone_listener
from support.daemon import wait_for


def test_out_of_files_accept_errors_are_logged_once_per_streak_and_backed_off(tmp_path):
    log_path = tmp_path / "listener.log"
    with open(log_path, "wb") as log:
        proc, port = lone_listener.start(log)
    clients: list[socket.socket] = []
    try:
        assert proc.stdout is not None and proc.stdin is not None
        for _ in range(30):  # more than the 8 descriptors it may open: the rest wait in the backlog
            clients.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        wait_for(lambda: "cannot accept connections" in log_path.read_text(), 20, what="the streak logged")
        streak_started = time.monotonic()

        def failed_accepts() -> int:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(b"\n")
            proc.stdin.flush()
            return int(proc.stdout.readline())

        # the streak goes on for a few attempts, backing off: 50, 100, 200 ms between them
        wait_for(lambda: failed_accepts() >= 4, 20, interval_s=0.05, what="four failed accepts")
        for sock in clients:
            sock.close()
        wait_for(lambda: "accepting connections again" in log_path.read_text(), 20, what="the streak's end")
        streak_s = time.monotonic() - streak_started
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:  # it serves again
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        proc.stdin.close()
        errors = int(proc.stdout.readline())
        assert proc.wait(20) == 0
    finally:
        for sock in clients:
            sock.close()
        if proc.poll() is None:
            proc.kill()
    text = log_path.read_text()
    assert text.count("cannot accept connections") == 1 and "Too many open files" in text, text
    assert text.count("accepting connections again after") == 1, text
    assert "Traceback" not in text and "socket.accept() out of system resource" not in text, text
    # backing off 50 ms doubling to 1 s: a handful of attempts a second, where a spinning loop makes thousands
    assert 1 <= errors <= 10 + 2 * streak_s, (errors, streak_s)
