"""The gRPC receiver's room keeping: channelz's timestamps and addresses read as the sockets'."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

from tracescorer.receiver.grpc_room import _epoch, _host, _peer, margin


def test_channelz_timestamps_are_read_to_the_microsecond():
    expected = datetime(2026, 12, 8, 1, 30, 48, 464795, tzinfo=UTC).timestamp()
    assert abs(_epoch("2026-12-08T01:30:48.464795706Z") - expected) < 1e-5
    assert _epoch("2026-12-08T01:30:48Z") == datetime(2026, 12, 8, 1, 30, 48, tzinfo=UTC).timestamp()


def test_peers_compare_as_the_dual_stack_socket_shows_them():
    # grpc listens on a dual-stack socket: getpeername() says ::ffff:127.0.0.1, channelz 127.0.0.1
    assert _host("::ffff:127.0.0.1") == "127.0.0.1" == _host(bytes([127, 0, 0, 1]))
    assert _host("::1") == "::1"
    address = {"tcpipAddress": {"ipAddress": base64.b64encode(bytes([127, 0, 0, 1])).decode(), "port": 4317}}
    assert _peer(address) == ("127.0.0.1", 4317)
    assert _peer({"udsAddress": {"filename": "/tmp/s"}}) is None


def test_the_margin_is_a_sixteenth_of_the_cap_and_one_at_least():
    assert margin(414) == 25 and margin(1024) == 64 and margin(8) == 1
