"""How CLI read commands find a running daemon: a small state file beside the database.

``serve`` writes ``<store.path>.serve.json`` (mode 0600) with its pid, the local URL of its HTTP
listener and the token for the read-only query endpoint, and removes it on exit. Read commands
go through that endpoint while the daemon runs (DuckDB lets one process hold the file for
writing) and open the file read-only otherwise.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

QUERY_PATH = "/api/v1/query"
BACKFILL_PATH = "/api/v1/backfill"


@dataclass(frozen=True, slots=True)
class ServeInfo:
    pid: int
    url: str
    token: str
    cafile: str | None = None
    grpc_port: int = 0


def serve_info_path(db_path: str) -> Path:
    return Path(db_path + ".serve.json")


def write_serve_info(db_path: str, info: ServeInfo) -> Path:
    path = serve_info_path(db_path)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(
            {"pid": info.pid, "url": info.url, "token": info.token, "cafile": info.cafile, "grpc_port": info.grpc_port},
            fh,
        )
    os.replace(tmp, path)
    return path


def remove_serve_info(db_path: str) -> None:
    try:
        serve_info_path(db_path).unlink()
    except FileNotFoundError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_serve_info(db_path: str) -> ServeInfo | None:
    """The running daemon's info, or None when none runs (stale files are ignored)."""
    try:
        data = json.loads(serve_info_path(db_path).read_text())
        info = ServeInfo(
            pid=int(data["pid"]),
            url=str(data["url"]),
            token=str(data["token"]),
            cafile=data.get("cafile"),
            grpc_port=int(data.get("grpc_port") or 0),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if _alive(info.pid) else None


def wait_for_daemon(db_path: str, proc: Any, timeout_s: float = 60.0) -> ServeInfo | None:
    """Wait until the ``serve`` child process ``proc`` (a Popen) published its info; None if it
    exited or the deadline passed."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        info = read_serve_info(db_path)
        if info is not None:
            return info
        time.sleep(0.1)
    return None


class RemoteQueryError(RuntimeError):
    """The daemon refused or failed a request (the message is the daemon's)."""


class DaemonUnreachable(RemoteQueryError):
    """No daemon answered at the address in the state file."""


def remote_query(info: ServeInfo, sql: str, *, max_rows: int, timeout_s: float = 60.0) -> dict[str, Any]:
    """Run a read-only query through the daemon; returns ``{columns, types, rows, truncated}``."""
    return call_daemon(info, "POST", QUERY_PATH, {"sql": sql, "max_rows": max_rows}, timeout_s=timeout_s)


def call_daemon(info: ServeInfo, method: str, path: str, payload: dict[str, Any] | None = None,
                *, timeout_s: float = 60.0) -> dict[str, Any]:
    """One authenticated JSON call to the daemon's local API."""
    req = urllib.request.Request(
        info.url.rstrip("/") + path,
        data=None if payload is None else json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {info.token}"},
        method=method,
    )
    context = ssl.create_default_context(cafile=info.cafile) if info.cafile else None
    if context is not None:
        context.check_hostname = False
    try:
        with urllib.request.urlopen(req, timeout=timeout_s, context=context) as resp:
            result: dict[str, Any] = json.loads(resp.read())
            return result
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", str(exc))
        except ValueError:
            message = str(exc)
        raise RemoteQueryError(message) from None
    except (urllib.error.URLError, OSError) as exc:
        raise DaemonUnreachable(f"cannot reach the daemon at {info.url}: {exc}") from None
