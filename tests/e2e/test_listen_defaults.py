"""The receivers bind to loopback unless told otherwise (as the Collector's do): a daemon with no
host configured is not reachable on the machine's other addresses; one environment variable
opens the gRPC port for a Collector on another host, with a warning while no token guards it;
the container image opens both explicitly."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from support.daemon import REPO, DaemonProcess

_SERVING = re.compile(r"OTLP gRPC (\S+):(\d+), OTLP HTTP (\S+):(\d+) ")


def _outbound_address() -> str | None:
    """This machine's non-loopback IPv4 address (a UDP connect sends nothing), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


def _reachable(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError:
        return False
    return True


def _config(tmp_path: Path) -> dict[str, object]:
    # no receiver host: the defaults (ports 0: any free one)
    return {
        "receiver": {"grpc": {"port": 0}, "http": {"port": 0}},
        "api": {"port": 0},
        "store": {"path": str(tmp_path / "ts.duckdb")},
        "workers": {"count": 0},  # the receivers are the main process's: no worker processes to start
    }


def test_receivers_bind_to_loopback_by_default(tmp_path: Path) -> None:
    daemon = DaemonProcess(tmp_path, _config(tmp_path)).start()
    try:
        m = _SERVING.search(daemon.log())
        assert m is not None, daemon.log()
        assert (m[1], m[3]) == ("127.0.0.1", "127.0.0.1")
        grpc_port, http_port = int(m[2]), int(m[4])
        assert _reachable("127.0.0.1", grpc_port) and _reachable("127.0.0.1", http_port)
        other = _outbound_address()
        if other is not None:
            assert not _reachable(other, grpc_port) and not _reachable(other, http_port)
    finally:
        assert daemon.stop() == 0
    assert "reachable beyond this host" not in daemon.log()


def test_one_variable_opens_grpc_to_other_hosts_and_warns_without_a_token(tmp_path: Path) -> None:
    daemon = DaemonProcess(tmp_path, _config(tmp_path), env={"TRACESCORER_RECEIVER__GRPC__HOST": "0.0.0.0"}).start()
    try:
        m = _SERVING.search(daemon.log())
        assert m is not None and (m[1], m[3]) == ("0.0.0.0", "127.0.0.1"), daemon.log()
        other = _outbound_address()
        if other is None:
            pytest.skip("no address beside loopback to connect from")
        assert _reachable(other, int(m[2])) and not _reachable(other, int(m[4]))
    finally:
        assert daemon.stop() == 0
    assert "receiver.grpc 0.0.0.0: OTLP ingest is reachable beyond this host without receiver.auth_token" in (
        daemon.log()
    )


def test_the_container_image_listens_on_all_interfaces_explicitly() -> None:
    env = re.search(r"^ENV (.+?)(?=^\S)", (REPO / "Dockerfile").read_text(), re.M | re.S)
    assert env is not None
    assert "TRACESCORER_RECEIVER__GRPC__HOST=0.0.0.0" in env[1] and "TRACESCORER_RECEIVER__HTTP__HOST=0.0.0.0" in env[1]
