"""What the state file (:mod:`tracescorer.control`) says about this daemon: its pid, the URLs a
local read command reaches its OTLP HTTP listener and its ops API at, the ops API's token."""

from __future__ import annotations

import os

from tracescorer import control
from tracescorer.config import Settings


def local_host(host: str) -> str:
    """An address a local client can connect to for a listener bound to ``host``."""
    return "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host


def serve_info(
    settings: Settings, *, http_port: int, api_port: int, grpc_port: int, api_token: str
) -> control.ServeInfo:
    """The state file's content for this process, serving on the ports given (0: not listening)."""
    s = settings
    scheme = "https" if s.receiver.tls.enabled else "http"
    return control.ServeInfo(
        pid=os.getpid(),
        url=f"{scheme}://{local_host(s.receiver.http.host)}:{http_port}" if http_port else "",
        api_url=f"{scheme}://{local_host(s.api.host)}:{api_port}" if api_port else "",
        api_token=api_token,
        cafile=str(s.receiver.tls.cert_file) if s.receiver.tls.cert_file else None,
        grpc_port=grpc_port,
    )
