"""How CLI commands find and talk to a running daemon: a small state file beside the database.

``serve`` writes ``<store.path>.serve.json`` (mode 0600) with its pid, the URLs of its OTLP HTTP
listener and of its ops API (``api:``), and the ops API's token, generated at each start; it
removes the file on exit. While the file names a live process, read commands always go through
the ops API (DuckDB lets one process hold the file for writing) and never open the locked file;
when it does not, they open the file read-only.

This module is imported by every read command: it only uses the standard library.
"""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

QUERY_PATH = "/api/v1/query"
READS_PATH = "/api/v1/reads"  # + "/<read name>": the product's typed reads (tracescorer.store.reads)
BACKFILL_PATH = "/api/v1/backfill"
RELOAD_PATH = "/api/v1/reload"  # reads the configuration file again (tracescorer.daemon.reload)
# How long a read command keeps retrying a daemon that refuses connections (it may be starting
# its listeners, or stopping) before it says so.
RETRY_S = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeInfo:
    """What the state file says about a running daemon."""

    pid: int
    url: str  # OTLP HTTP base URL ("" when receiver.http is disabled)
    api_url: str  # ops API base URL ("" when api.enabled is false)
    api_token: str
    cafile: str | None = None
    grpc_port: int = 0
    path: str = ""  # the state file itself


def serve_info_path(db_path: str) -> Path:
    return Path(db_path + ".serve.json")


def write_serve_info(db_path: str, info: ServeInfo) -> Path:
    path = serve_info_path(db_path)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(
            {
                "pid": info.pid,
                "url": info.url,
                "api_url": info.api_url,
                "api_token": info.api_token,
                "cafile": info.cafile,
                "grpc_port": info.grpc_port,
            },
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
    """The running daemon's info, or None when none runs (a file left by a dead process is ignored)."""
    path = serve_info_path(db_path)
    try:
        data = json.loads(path.read_text())
        info = ServeInfo(
            pid=int(data["pid"]),
            url=str(data.get("url") or ""),
            api_url=str(data.get("api_url") or ""),
            api_token=str(data.get("api_token") or ""),
            cafile=data.get("cafile"),
            grpc_port=int(data.get("grpc_port") or 0),
            path=str(path),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if _alive(info.pid) else None


def wait_for_daemon(db_path: str, proc: Any, timeout_s: float = 60.0) -> ServeInfo | None:
    """Wait until the ``serve`` child process ``proc`` (a Popen) published its info; None if it
    exited or the deadline passed."""
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
    """The daemon in the state file does not answer; the message says what to do."""


class DaemonBusy(RemoteQueryError):
    """The daemon kept refusing the request for its concurrency bound (429) until the wait ran out."""


def remote_query(
    info: ServeInfo, sql: str, *, max_rows: int, timeout_s: float = 60.0, params: Sequence[Any] = ()
) -> dict[str, Any]:
    """Run a read-only query (``?`` parameters: JSON scalars) through the daemon; returns
    ``{columns, types, rows, truncated}``."""
    payload: dict[str, Any] = {"sql": sql, "max_rows": max_rows}
    if params:
        payload["params"] = list(params)
    return call_daemon(info, "POST", QUERY_PATH, payload, timeout_s=timeout_s)


def remote_read(info: ServeInfo, name: str, args: dict[str, Any], *, timeout_s: float = 60.0) -> dict[str, Any]:
    """One of the product's typed reads through the daemon, by name, its arguments as JSON
    (:meth:`tracescorer.store.reads.ReadStore.perform_named`); returns ``{columns, types, rows,
    truncated}``."""
    return call_daemon(info, "POST", f"{READS_PATH}/{name}", {"args": args}, timeout_s=timeout_s)


def call_daemon(
    info: ServeInfo,
    method: str,
    path: str,
    payload: dict[str, Any] | None = None,
    *,
    timeout_s: float = 60.0,
    retry_s: float = RETRY_S,
) -> dict[str, Any]:
    """One authenticated JSON call to the daemon's ops API.

    Refused connections are retried for ``retry_s`` (a daemon starting or stopping); then, or on
    a timeout, :class:`DaemonUnreachable` says which daemon did not answer and what to do. A
    request refused as retryable (429 or 503 with ``Retry-After``: as many queries running as the
    daemon allows) is sent again after the time it says, for up to ``timeout_s``; then
    :class:`DaemonBusy`.
    """
    if not info.api_url:
        raise DaemonUnreachable(
            f"a daemon runs on this database (pid {info.pid}) with its ops API disabled (api.enabled: false): "
            "read commands need it while the daemon runs; enable it, or stop the daemon to read the file"
        )
    req = urllib.request.Request(
        info.api_url.rstrip("/") + path,
        data=None if payload is None else json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {info.api_token}"},
        method=method,
    )
    context = ssl.create_default_context(cafile=info.cafile) if info.cafile else None
    if context is not None:
        context.check_hostname = False
    deadline = time.monotonic() + retry_s
    busy_until = time.monotonic() + timeout_s
    delay = 0.05
    while True:
        try:
            with urllib.request.urlopen(req, timeout=timeout_s, context=context) as resp:
                result: dict[str, Any] = json.loads(resp.read())
                return result
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error", str(exc))
            except ValueError:
                message = str(exc)
            wait_s = _retry_after(exc)
            if wait_s is None:
                raise RemoteQueryError(message) from None
            if time.monotonic() + wait_s > busy_until:
                raise DaemonBusy(f"the daemon (pid {info.pid}) is busy: {message}") from None
            time.sleep(wait_s)
        except (urllib.error.URLError, OSError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            refused = isinstance(reason, (ConnectionRefusedError, ConnectionResetError))
            if refused and time.monotonic() + delay < deadline and _alive(info.pid):
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
                continue
            raise DaemonUnreachable(
                f"the daemon (pid {info.pid}, state file {info.path or 'beside the database'}) does not answer "
                f"at {info.api_url}: {reason}. If it is starting or busy, try again; if that process is not "
                "tracescorer, delete the state file"
            ) from None


def _retry_after(exc: urllib.error.HTTPError) -> float | None:
    """Seconds a retryable refusal (429, 503) asks to wait, at most 5; None when it is not one."""
    if exc.code not in (429, 503):
        return None
    try:
        return min(5.0, max(0.05, float(exc.headers.get("Retry-After", ""))))
    except ValueError:
        return None


def publish_serve_info(db_path: str, info: ServeInfo) -> None:
    """Write the state file unless the database is in memory (nothing could read it)."""
    if db_path != ":memory:":
        write_serve_info(db_path, info)


def withdraw_serve_info(db_path: str) -> None:
    """Remove the state file (at the very end of a stop: read commands go through the daemon until then)."""
    if db_path != ":memory:":
        remove_serve_info(db_path)
