"""A real PostgreSQL server for the tests: ``initdb`` + ``pg_ctl`` in a temp directory.

One server per test session (started on first use), listening on 127.0.0.1 on a free port and on
a Unix socket in its own directory; each test gets a fresh database (:func:`create_database`).
PostgreSQL refuses to run as root, so as root the server runs as the ``postgres`` OS user (made
by Debian's ``postgresql`` package, which ``make test`` installs when the binaries are missing).
Durability settings are relaxed (``fsync=off``): the tests are about behaviour, not crash safety
of PostgreSQL itself; ``bench/scaleout.py`` passes ``durable=True``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BIN_GLOB = "/usr/lib/postgresql/*/bin"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def find_bin_dir() -> Path:
    """The newest PostgreSQL server binary directory (``initdb``, ``pg_ctl``)."""
    explicit = os.environ.get("TRACESCORER_PG_BIN")
    candidates = (
        [explicit]
        if explicit
        else sorted(glob.glob(BIN_GLOB), key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0)
    )
    for candidate in reversed(candidates):
        if candidate and (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    raise PostgresUnavailable(
        "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin "
        "(install Debian's `postgresql` package, or set TRACESCORER_PG_BIN)"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresServer:
    """A running test server; :meth:`stop` ends it and removes its directory."""

    root: Path
    port: int
    bin_dir: Path
    user: str | None  # OS user the server runs as (None: the current one)

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def _run(self, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
        cmd = list(args)
        if self.user is not None:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd="/")

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        out = self._run(
            str(self.bin_dir / "psql"),
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            dbname,
            "-c",
            sql,
        )
        if out.returncode != 0:
            raise RuntimeError(f"psql failed: {out.stderr.strip()}")
        return out.stdout

    def stop(self) -> None:
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def start_server(*, durable: bool = False, max_connections: int = 200) -> PostgresServer:
    """initdb a new cluster in a temp directory and start it (trust auth, 127.0.0.1 only)."""
    bin_dir = find_bin_dir()
    user: str | None = None
    root = Path(tempfile.mkdtemp(prefix="tracescorer-pg-"))
    if os.geteuid() == 0:
        user = "postgres"
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            raise PostgresUnavailable(
                "running as root and there is no `postgres` OS user to run the server as"
            ) from None
        os.chmod(root, 0o755)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    server = PostgresServer(root=root, port=_free_port(), bin_dir=bin_dir, user=user)
    data = root / "data"
    out = server._run(
        str(bin_dir / "initdb"),
        "-D",
        str(data),
        "-U",
        "postgres",
        "-A",
        "trust",
        "-E",
        "UTF8",
        "--no-locale",
        "--no-sync",
        timeout_s=120,
    )
    if out.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {out.stderr.strip() or out.stdout.strip()}")
    options = [
        "-c listen_addresses=127.0.0.1",
        f"-c port={server.port}",
        f"-c unix_socket_directories={root}",
        f"-c max_connections={max_connections}",
        "-c shared_buffers=64MB",
    ]
    if not durable:
        options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
    for attempt in range(3):
        out = server._run(
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(root / "server.log"),
            "-w",
            "-t",
            "60",
            "-o",
            " ".join(options),
            "start",
            timeout_s=90,
        )
        if out.returncode == 0:
            break
        server.port = _free_port()  # the port was taken meanwhile
        options[1] = f"-c port={server.port}"
        time.sleep(0.1 * (attempt + 1))
    else:
        log = (root / "server.log").read_text(errors="replace") if (root / "server.log").exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"pg_ctl start failed: {out.stderr.strip()} {log[-2000:]}")
    return server


_counter = [0]


def create_database(server: PostgresServer, prefix: str = "t") -> str:
    """A new empty database on ``server``; returns its DSN."""
    _counter[0] += 1
    name = f"{prefix}_{os.getpid()}_{_counter[0]}"
    server.psql(f'CREATE DATABASE "{name}"')
    return server.dsn(name)


@contextlib.asynccontextmanager
async def two_daemons(dsn: str) -> AsyncIterator[tuple[Any, Any]]:
    """The started result stores of daemons ``a`` and ``b`` on one PostgreSQL database."""
    from tracescorer.store.postgres.store import PostgresResultStore

    a = PostgresResultStore(dsn, owner="a", instance_id="inst-a")
    b = PostgresResultStore(dsn, owner="b", instance_id="inst-b")
    await a.start()
    await b.start()
    try:
        yield a, b
    finally:
        await a.stop()
        await b.stop()
