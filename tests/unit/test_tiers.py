"""The unit tier's guard (tests/support/tiers.py) refuses what only the other tiers may use."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.tiers import TierViolation, tier_of


def test_a_subprocess_is_refused_and_named() -> None:
    with pytest.raises(TierViolation, match="subprocess.*tests/contract"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)


@pytest.mark.parametrize("family", [socket.AF_INET, socket.AF_INET6])
def test_a_network_socket_is_refused(family: socket.AddressFamily) -> None:
    host = "127.0.0.1" if family == socket.AF_INET else "::1"
    with socket.socket(family, socket.SOCK_STREAM) as s:
        with pytest.raises(TierViolation, match="network socket"):
            s.bind((host, 0))
        with pytest.raises(TierViolation, match="network socket"):
            s.connect((host, 9))


async def test_an_event_loops_own_socketpair_still_works() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(b"x")
        assert b.recv(1) == b"x"
    assert await asyncio.sleep(0, result=1) == 1


def test_the_tier_is_the_first_folder_under_tests() -> None:
    tests = Path(__file__).resolve().parents[1]
    assert tier_of(tests / "unit" / "store" / "test_x.py") == "unit"
    assert tier_of(tests / "contract" / "test_x.py") == "contract"
    assert tier_of(tests / "e2e" / "test_x.py") == "e2e"
    assert tier_of(tests / "support" / "daemon.py") is None


def test_every_test_here_carries_its_tiers_marker(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("unit") is not None
    assert request.node.get_closest_marker("e2e") is None
