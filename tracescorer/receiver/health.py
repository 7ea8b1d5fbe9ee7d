"""``grpc.health.v1.Health`` on the OTLP gRPC port (Kubernetes gRPC probes, load balancers).

SERVING while the daemon is ready (what ``/readyz`` says), NOT_SERVING while it is not, before it
is ready and from the start of its shutdown on, for the whole server (service ``""``) and each
OTLP service. The status is the standard servicer's (``Check`` and ``Watch``), which lives on
grpc's loop; the daemon's loop decides it, every :data:`POLL_S`, and hands changes over.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

log = logging.getLogger(__name__)

POLL_S = 0.5
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class HealthService:
    """The health servicer of one grpc.aio server and what keeps its status current."""

    def __init__(self, readiness: Callable[[], str | None], services: Sequence[str]) -> None:
        self._readiness = readiness
        self._services = ("", *services)
        self._servicer = health.aio.HealthServicer()
        self._serving: bool | None = None

    async def add_to(self, server: grpc.aio.Server) -> None:
        """On grpc's loop: NOT_SERVING until the first poll says otherwise."""
        for service in self._services:
            await self._servicer.set(service, NOT_SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(self._servicer, server)

    async def watch(self, grpc_loop: asyncio.AbstractEventLoop) -> None:
        """On the daemon's loop until cancelled: hand each change of readiness over to grpc's loop."""
        while True:
            try:
                reason = self._readiness()
            except Exception as exc:  # noqa: BLE001 - a failing check means "not serving", like /readyz
                reason = f"readiness check failed: {exc}"
            serving = reason is None
            if serving != self._serving:
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._set(serving), grpc_loop))
                if self._serving is not None:
                    log.info(
                        "gRPC health: %s%s", "SERVING" if serving else "NOT_SERVING", "" if serving else f" ({reason})"
                    )
                self._serving = serving
            await asyncio.sleep(POLL_S)

    async def _set(self, serving: bool) -> None:
        for service in self._services:
            await self._servicer.set(service, SERVING if serving else NOT_SERVING)

    async def shut_down(self) -> None:
        """On grpc's loop: NOT_SERVING for good."""
        await self._servicer.enter_graceful_shutdown()
