"""Framed messages between the daemon's own processes (its store process, its workers) over Unix sockets.

A frame is an 8-byte big-endian length followed by a pickle. Only two trusted processes of the
same program talk over this socket (a socketpair, never a listening address), so pickle is safe
here. The daemon side is asyncio (:class:`AsyncChannel`); the store side uses blocking sockets.
"""

from __future__ import annotations

import asyncio
import pickle
import socket
import struct
import threading
from typing import Any

_HEADER = struct.Struct(">Q")
PROTOCOL = pickle.HIGHEST_PROTOCOL


_BUFFER_BYTES = 8 << 20  # a whole request's rows fit in one send: fewer wake-ups on both sides


def encode(message: Any) -> bytes:
    body = pickle.dumps(message, protocol=PROTOCOL)
    return _HEADER.pack(len(body)) + body


def enlarge_buffers(sock: socket.socket) -> None:
    """Ask for socket buffers of a few MB (privileged processes may exceed the system default)."""
    for force, plain in (
        (getattr(socket, "SO_SNDBUFFORCE", None), socket.SO_SNDBUF),
        (getattr(socket, "SO_RCVBUFFORCE", None), socket.SO_RCVBUF),
    ):
        for option in (force, plain):
            if option is None:
                continue
            try:
                sock.setsockopt(socket.SOL_SOCKET, option, _BUFFER_BYTES)
                break
            except OSError:
                continue


class BlockingChannel:
    """The store side: blocking receive on one thread, thread-safe send."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(True)
        self._sock = sock
        self._send_lock = threading.Lock()
        self._closed = False

    def _read_exact(self, size: int) -> bytearray | None:
        buf = bytearray(size)
        view = memoryview(buf)
        got = 0
        while got < size:
            try:
                n = self._sock.recv_into(view[got:])
            except OSError:
                # the daemon was killed with replies unread: its end resets the connection
                # (ECONNRESET) instead of closing it; either way it is gone
                return None
            if not n:
                return None
            got += n
        return buf

    def recv(self) -> Any | None:
        """The next message, or None at end of stream (the daemon went away)."""
        header = self._read_exact(_HEADER.size)
        if header is None:
            return None
        body = self._read_exact(_HEADER.unpack(header)[0])
        return None if body is None else pickle.loads(body)

    def send(self, message: Any) -> bool:
        """False when the daemon is gone."""
        frame = encode(message)
        with self._send_lock:
            if self._closed:
                return False
            try:
                self._sock.sendall(frame)
            except OSError:
                return False
        return True

    def close(self) -> None:
        """Close the socket; under the send lock, so that no thread sends on a descriptor number
        that a new socket may have taken meanwhile."""
        with self._send_lock:
            self._closed = True
            try:
                self._sock.close()
            except OSError:
                pass


class AsyncChannel:
    """The daemon side: an asyncio stream for replies, and one sender task that writes frames in
    order with ``sock_sendall`` on a second descriptor of the socket (no copy of the buffered
    bytes on every partial write, as a stream transport makes for large frames)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, send_sock: socket.socket) -> None:
        self._reader = reader
        self._writer = writer
        self._send_sock = send_sock
        self._outbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._sender = asyncio.create_task(self._send_loop(), name="ipc-sender")

    @classmethod
    async def open(cls, sock: socket.socket) -> AsyncChannel:
        enlarge_buffers(sock)
        send_sock = sock.dup()
        send_sock.setblocking(False)
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=1 << 24)
        return cls(reader, writer, send_sock)

    async def recv(self) -> Any | None:
        try:
            header = await self._reader.readexactly(_HEADER.size)
            body = await self._reader.readexactly(_HEADER.unpack(header)[0])
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        return pickle.loads(body)

    def send(self, frame: bytes) -> None:
        """Queue an encoded frame. A frame the socket no longer takes is dropped: the peer is gone,
        and the reply stream's end tells the caller so (its requests fail there)."""
        self._outbox.put_nowait(frame)

    async def _send_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while (frame := await self._outbox.get()) is not None:
            try:
                await loop.sock_sendall(self._send_sock, frame)
            except OSError:
                continue
            finally:
                self._outbox.task_done()

    async def drain(self, timeout_s: float = 5.0) -> bool:
        """Wait until every queued frame was written (or the peer is gone); whether it was in time."""
        try:
            await asyncio.wait_for(self._outbox.join(), timeout_s)
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        self._outbox.put_nowait(None)
        self._writer.close()
        try:
            self._send_sock.close()
        except OSError:
            pass
