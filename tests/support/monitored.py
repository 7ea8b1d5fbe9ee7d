"""An App on the test's loop watched by one monitor, with the clock the test moves: what the
monitor tests share (send conversations, let the monitor count them, read its figures)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from support.clock import ManualClock
from support.daemon import settled, wait_for_async
from tracescorer.app import App
from tracescorer.demo import emit_conversations
from tracescorer.monitors import MonitorService

STEP_S = 1.0
MAX_STEPS = 5  # a step moves the clock at most this many times STEP_S

_seq = iter(range(1_000_000))


class Monitored:
    """``app`` with the monitor ``monitor``, its ``clock``; ``sent``: the samples it should hold."""

    def __init__(self, app: App, clock: ManualClock, monitor: str) -> None:
        self.app, self.clock, self.monitor = app, clock, monitor
        self.sent = 0

    @property
    def service(self) -> MonitorService:
        assert isinstance(self.app.monitors.running, MonitorService)
        return self.app.monitors.running

    def samples(self) -> float | None:
        return self.app.metrics.registry.get_sample_value("tracescorer_monitor_samples", {"monitor": self.monitor})

    def transitions(self, state: str) -> float:
        value = self.app.metrics.registry.get_sample_value(
            "tracescorer_monitor_transitions_total", {"monitor": self.monitor, "state": state}
        )
        return value or 0.0

    async def send(self, agent: str, answers: list[Any]) -> None:
        """One single-turn conversation of ``agent`` per answer (the demo judge's verdict), then
        move the clock until the monitor counted them all (the assembly closes a trace once the
        clock passed idle_s; a span it took after the clock moved closes a step later)."""
        conversations = [
            {"id": f"c-{next(_seq)}", "agent": agent, "turns": [("How is my order?", None, None, None, a)]}
            for a in answers
        ]
        await asyncio.to_thread(emit_conversations, f"127.0.0.1:{self.app.grpc_port}", conversations)
        self.sent += len(answers)
        await settled(self.app)
        counted = lambda: self.samples() == self.sent  # noqa: E731
        for _ in range(MAX_STEPS - 1):
            self.clock.advance(STEP_S)
            with contextlib.suppress(TimeoutError):
                await wait_for_async(counted, 5, what=f"{self.sent} samples counted")
                return
        self.clock.advance(STEP_S)
        await wait_for_async(counted, 60, what=f"{self.sent} samples counted")
