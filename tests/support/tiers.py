"""The suite's tiers, set by directory, and what each may use (a pytest plugin: tests/conftest.py).

- ``tests/unit``: the code in the test's process and nothing else. No subprocess, no network socket
  (AF_INET/AF_INET6: no fake server, no receiver), so no store process, no PostgreSQL. Enforced
  here while each test runs (its fixtures' setup and teardown included): a test that reaches for
  one fails with :class:`TierViolation` naming what it used. An event loop's own socketpair is fine.
- ``tests/contract``: one part against a real peer, in the test's process: each store engine behind
  the store protocols (a store process, a PostgreSQL server), the judge and the sinks against local
  HTTP servers, the receivers against the OpenTelemetry SDK's exporters.
- ``tests/e2e``: the daemon whole: an App on the test's loop, ``tracescorer serve`` as processes
  (kill -9, scale-out, the Collector hop) and the CLI.

Each test gets the marker of its tier (``-m unit`` and so on). ``--budget-test-s S`` fails the run
when any test took longer than S seconds (setup, call and teardown), naming each; ``--budget-run-s
S`` fails it when the whole run took longer (``make test-budget``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parents[1]
TIERS = ("unit", "contract", "e2e")


class TierViolation(AssertionError):
    """A unit test used what only the contract and e2e tiers may (a process, a network socket)."""


def tier_of(path: Path) -> str | None:
    """The tier of a test file: the first folder under tests/."""
    try:
        top = Path(path).resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return None
    return top if top in TIERS else None


def _refuse(what: str) -> None:
    raise TierViolation(
        f"a unit test may not use {what}: move it to tests/contract (a part against a real peer) "
        "or tests/e2e (the daemon) — see tests/support/tiers.py"
    )


_NETWORK = {socket.AF_INET, socket.AF_INET6}


@contextlib.contextmanager
def unit_guard() -> Iterator[None]:
    """Refuse subprocesses, forks and network sockets while the block runs."""
    popen_init = subprocess.Popen.__init__
    connect, connect_ex, bind = socket.socket.connect, socket.socket.connect_ex, socket.socket.bind
    fork, spawn = os.fork, getattr(os, "posix_spawn", None)

    def no_popen(self: Any, args: Any, *a: Any, **k: Any) -> None:
        _refuse(f"a subprocess ({args!r})")

    def guarded(method: Any, verb: str) -> Any:
        def call(self: socket.socket, address: Any, *a: Any) -> Any:
            if self.family in _NETWORK:
                _refuse(f"a network socket ({verb} {address!r})")
            return method(self, address, *a)

        return call

    def no_fork(*a: Any, **k: Any) -> Any:
        _refuse("a forked process")

    subprocess.Popen.__init__ = no_popen  # type: ignore[method-assign]
    socket.socket.connect = guarded(connect, "connect")  # type: ignore[method-assign]
    socket.socket.connect_ex = guarded(connect_ex, "connect")  # type: ignore[method-assign]
    socket.socket.bind = guarded(bind, "bind")  # type: ignore[method-assign]
    os.fork = no_fork
    if spawn is not None:
        os.posix_spawn = no_fork
    try:
        yield
    finally:
        subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
        socket.socket.connect, socket.socket.connect_ex, socket.socket.bind = connect, connect_ex, bind  # type: ignore[method-assign]
        os.fork = fork
        if spawn is not None:
            os.posix_spawn = spawn


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tiers", "test tiers and budgets (tests/support/tiers.py)")
    group.addoption("--budget-test-s", type=float, default=None, help="fail the run when a test takes longer")
    group.addoption("--budget-run-s", type=float, default=None, help="fail the run when it takes longer")


def pytest_configure(config: pytest.Config) -> None:
    for tier in TIERS:
        config.addinivalue_line("markers", f"{tier}: a test of the {tier} tier (set by its folder: tests/{tier}/)")
    config._tier_budget = _Budget(config)  # type: ignore[attr-defined]
    config.pluginmanager.register(config._tier_budget, "tier-budget")  # type: ignore[attr-defined]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(item.path)
        if tier is None:
            raise pytest.UsageError(f"{item.nodeid}: every test lives in a tier's folder: tests/{{{','.join(TIERS)}}}/")
        item.add_marker(tier)
    # the longest files first (e2e, then contract; a file's own order kept): with a file per xdist
    # worker at a time, the many short unit files then fill the gaps instead of a daemon test
    # starting last and setting the run's end
    items.sort(key=lambda item: -TIERS.index(tier_of(item.path) or "unit"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    # the session's last teardown also ends session fixtures another tier started (PostgreSQL)
    with _guarded(item) if nextitem is not None else contextlib.nullcontext():
        yield


def _guarded(item: pytest.Item) -> contextlib.AbstractContextManager[None]:
    return unit_guard() if tier_of(item.path) == "unit" else contextlib.nullcontext()


class _Budget:
    """Each test's time (setup + call + teardown) and the run's, against the budgets asked for."""

    def __init__(self, config: pytest.Config) -> None:
        self.per_test = config.getoption("--budget-test-s")
        self.per_run = config.getoption("--budget-run-s")
        self.started = time.monotonic()
        self.took: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.took[report.nodeid] = self.took.get(report.nodeid, 0.0) + report.duration

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        over = self._over()
        if over:
            terminalreporter.section("budgets", sep="=", red=True)
            for line in over:
                terminalreporter.line(line)

    def _over(self) -> list[str]:
        lines = []
        if self.per_test is not None:
            lines += [
                f"{nodeid} took {took:.1f} s (budget {self.per_test:.0f} s a test)"
                for nodeid, took in sorted(self.took.items(), key=lambda kv: -kv[1])
                if took > self.per_test
            ]
        run = time.monotonic() - self.started
        if self.per_run is not None and run > self.per_run:
            lines.append(f"the run took {run:.1f} s (budget {self.per_run:.0f} s)")
        return lines

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if getattr(session.config, "workerinput", None) is not None:
            return  # an xdist worker: the controller sees every report and decides
        if self._over() and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
