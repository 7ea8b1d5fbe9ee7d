"""Room at the gRPC receiver's connection cap: the least recently active idle connections are closed.

grpc core accepts and keeps its connections in C. At ``grpc.max_allowed_incoming_connections`` it
closes each new connection as it is accepted, however long the others have been idle, and its own
options close connections by age alone (``grpc.max_connection_idle_ms``,
``grpc.max_connection_age_ms``): 1,010 idle clients under a 1,024-file limit kept a new exporter
out for 14-16 s (its retries until the idle ones timed out). grpc has no eviction, so
:class:`RoomKeeper` makes room itself: it counts the server's connections through channelz (grpc's
own introspection, on by default) and, while they are within :func:`margin` of the cap, shuts
down the least recently active idle ones (no stream in flight; active when their last stream
started, else when first seen here) until twice the margin is free. A connection is shut down with
shutdown(2) on a duplicate of grpc's descriptor, which grpc takes as the peer's hang-up (a client's
channel reconnects on its next call, as after a GOAWAY). Connections still in their handshake are
not in channelz; ``grpc.server_handshake_timeout_ms`` closes those.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from grpc._cython import cygrpc

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 0.25
_FD_DIR = "/proc/self/fd"
_TCP = (socket.AF_INET, socket.AF_INET6)


def margin(cap: int) -> int:
    """Connections kept free under the cap for new clients."""
    return max(1, cap // 16)


def _json(text: str) -> dict[str, Any]:
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


def _epoch(stamp: str) -> float:
    """Seconds since the epoch of a channelz timestamp (RFC 3339, nanoseconds, ``Z``)."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    base = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    return base + (float(f"0.{fraction}") if fraction else 0.0)


def _host(address: str | bytes) -> str:
    """An IP address as text, an IPv4-mapped IPv6 one (grpc's dual-stack sockets) as IPv4."""
    ip = ipaddress.ip_address(address)
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return str(mapped or ip)


def _peer(address: dict[str, Any]) -> tuple[str, int] | None:
    """The peer of a channelz socket."""
    tcp = address.get("tcpipAddress")
    if not isinstance(tcp, dict):
        return None
    return _host(base64.b64decode(tcp.get("ipAddress", ""))), int(tcp.get("port", 0))


def server_ids() -> set[int]:
    """The channelz ids of the gRPC servers in this process."""
    found: set[int] = set()
    start = 0
    while True:
        page = _json(cygrpc.channelz_get_servers(start))
        for server in page.get("server", []):
            found.add(int(server["ref"]["serverId"]))
        if page.get("end", True) or not found:
            return found
        start = max(found) + 1


class RoomKeeper:
    """The connections of one grpc server (channelz id ``server_id``) on ``port``, kept
    :func:`margin` below ``cap``; each one shut down is counted with ``evicted``."""

    def __init__(self, server_id: int, port: int, cap: int, evicted: Callable[[], None]) -> None:
        self._server_id = server_id
        self._port = port
        self._cap = cap
        self._evicted = evicted
        self._first_seen: dict[int, float] = {}  # channelz socket id -> when first counted here
        self.open = 0

    def check(self) -> int:
        """Count the connections; near the cap, shut down the least recently active idle ones
        (how many)."""
        refs = self._socket_ids()
        self.open = len(refs)
        now = time.time()
        self._first_seen = {sid: self._first_seen.get(sid, now) for sid in refs}
        if self.open < self._cap - margin(self._cap):
            return 0
        wanted = self.open - (self._cap - 2 * margin(self._cap))
        idle: list[tuple[float, int, tuple[str, int]]] = []  # last active, then the oldest (ids rise)
        for sid in refs:
            try:
                sock = _json(cygrpc.channelz_get_socket(sid)).get("socket", {})
            except ValueError:
                continue  # closed since it was counted
            data = sock.get("data", {})
            started = int(data.get("streamsStarted", 0))
            if started != int(data.get("streamsSucceeded", 0)) + int(data.get("streamsFailed", 0)):
                continue  # a call in flight
            peer = _peer(sock.get("remote", {}))
            if peer is None:
                continue
            last = data.get("lastRemoteStreamCreatedTimestamp")
            idle.append((_epoch(last) if last else self._first_seen[sid], sid, peer))
        idle.sort()
        return self._shut_down({peer for _, _, peer in idle[:wanted]})

    def _socket_ids(self) -> list[int]:
        ids: list[int] = []
        start = 0
        while True:
            page = _json(cygrpc.channelz_get_server_sockets(self._server_id, start, 1000))
            refs = [int(ref["socketId"]) for ref in page.get("socketRef", [])]
            ids.extend(refs)
            if page.get("end", True) or not refs:
                return ids
            start = refs[-1] + 1

    def _shut_down(self, peers: set[tuple[str, int]]) -> int:
        """shutdown(2) the sockets of this port connected to ``peers``."""
        done = 0
        try:
            fds = [int(name) for name in os.listdir(_FD_DIR)]
        except OSError:
            return 0
        for fd in fds:
            if not peers:
                break
            try:
                if not os.readlink(f"{_FD_DIR}/{fd}").startswith("socket:"):
                    continue
                with socket.socket(fileno=os.dup(fd)) as dup:
                    if dup.family not in _TCP or dup.getsockname()[1] != self._port:
                        continue
                    host, port = dup.getpeername()[:2]
                    peer = (_host(host), port)
                    if peer not in peers:
                        continue
                    dup.shutdown(socket.SHUT_RDWR)  # on the socket grpc holds too: its peer hung up
            except OSError:
                continue  # gone meanwhile, not a connected socket, or no descriptor left to duplicate
            peers.discard(peer)
            done += 1
            self._evicted()
        return done
