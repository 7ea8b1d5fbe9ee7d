"""What the daemon logs once it serves: its version and pid, the address each listener bound, the
store, the scorers bound, and a warning when OTLP ingest is reachable beyond this host without a
token.

The lines go to the logger the daemon hands in (``tracescorer.app``'s): they are the daemon's own
start-up lines, under the name operators filter them by.
"""

from __future__ import annotations

import logging
import os

from tracescorer import __version__
from tracescorer.config import Settings
from tracescorer.runner.stage import ScoringRunner


def address(host: str, port: int) -> str:
    """``127.0.0.1:4317``, ``[::]:4317``: what a listener bound, as logged at start."""
    if not port:
        return "off"
    return f"[{host}]:{port}" if ":" in host else f"{host or '0.0.0.0'}:{port}"


def serving(
    log: logging.Logger,
    settings: Settings,
    *,
    grpc_port: int,
    http_port: int,
    api_port: int,
    store: str,
    runner: ScoringRunner,
) -> None:
    """Log that the daemon serves (on the ports given, 0: off, and ``store``, the store's
    description), the bindings ``runner`` scores with, and an exposed ingest without a token."""
    s = settings
    log.info(
        "tracescorer %s serving (pid %d): OTLP gRPC %s, OTLP HTTP %s (and /metrics, /healthz, /readyz), ops API %s, %s",
        __version__,
        os.getpid(),
        address(s.receiver.grpc.host, grpc_port),
        address(s.receiver.http.host, http_port),
        address(s.api.host, api_port),
        store,
    )
    _log_bindings(log, runner)
    _warn_if_exposed(log, s)


def _warn_if_exposed(log: logging.Logger, s: Settings) -> None:
    exposed = [
        f"{what} {listener.host}"
        for what, listener in (("receiver.grpc", s.receiver.grpc), ("receiver.http", s.receiver.http))
        if listener.enabled and listener.host not in ("127.0.0.1", "::1", "localhost")
    ]
    if exposed and not s.receiver.auth_token:
        log.warning(
            "%s: OTLP ingest is reachable beyond this host without receiver.auth_token: anyone who reaches "
            "the port can write traces (set TRACESCORER_AUTH_TOKEN, or keep the host 127.0.0.1)",
            ", ".join(exposed),
        )


def _log_bindings(log: logging.Logger, runner: ScoringRunner) -> None:
    bound = runner.bindings
    if not bound:
        log.warning(
            "no scorers are bound: traces are stored and runs rebuilt, but nothing is scored "
            "(add bindings under `scorers:`, see config/scorers.example.yaml)"
        )
        return
    log.info(
        "%d scorer(s) bound: %s",
        len(bound),
        ", ".join(
            f"{b.binding.id} ({b.binding.prebuilt or b.binding.python}, {b.binding.scope}"
            f"{', judge' if b.uses_judge else ''}, sampling {b.binding.sampling.ratio:g})"
            for b in bound
        ),
    )
