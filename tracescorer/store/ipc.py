"""Framed messages between the daemon and its store process over one Unix socket.

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


def encode(message: Any) -> bytes:
    body = pickle.dumps(message, protocol=PROTOCOL)
    return _HEADER.pack(len(body)) + body


class BlockingChannel:
    """The store side: blocking receive on one thread, thread-safe send."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(True)
        self._sock = sock
        self._send_lock = threading.Lock()

    def _read_exact(self, size: int) -> bytes | None:
        chunks = []
        while size:
            chunk = self._sock.recv(min(size, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

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
            try:
                self._sock.sendall(frame)
            except OSError:
                return False
        return True

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


class AsyncChannel:
    """The daemon side: asyncio streams over the socket."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def open(cls, sock: socket.socket) -> AsyncChannel:
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=1 << 24)
        return cls(reader, writer)

    async def recv(self) -> Any | None:
        try:
            header = await self._reader.readexactly(_HEADER.size)
            body = await self._reader.readexactly(_HEADER.unpack(header)[0])
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        return pickle.loads(body)

    def send_nowait(self, frame: bytes) -> None:
        """Queue an encoded frame; call :meth:`drain` to wait while the socket buffer is full."""
        self._writer.write(frame)

    async def drain(self) -> None:
        await self._writer.drain()

    def close(self) -> None:
        self._writer.close()
