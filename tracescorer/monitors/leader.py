"""Several daemons, one set of monitors: the daemon that holds the monitors' lead runs them.

:class:`LeadingMonitors` tries to take the lead (the store's :class:`~tracescorer.store.api.Leadership`,
a PostgreSQL advisory lock) every ``check_s``; while it leads it runs a fresh
:class:`~tracescorer.monitors.service.MonitorService`, whose windows are recounted from every
daemon's stored scores (``rebuild_interval_s``). A daemon that loses the lead (its connection
dropped) stops its monitors; another daemon's next attempt takes over.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from tracescorer.aio import cancel
from tracescorer.monitors.service import MonitorService
from tracescorer.records.scores import DecisionRecord, ScoreRecord
from tracescorer.store.api import Leadership

log = logging.getLogger(__name__)

LEADER_CHECK_S = 5.0


class LeadingMonitors:
    """Runs the monitors while this daemon leads (see the module docstring)."""

    def __init__(
        self, build: Callable[[], MonitorService], leadership: Leadership, *, check_s: float = LEADER_CHECK_S
    ) -> None:
        self._build = build
        self._leadership = leadership
        self._check_s = check_s
        self._service: MonitorService | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def leading(self) -> bool:
        return self._service is not None

    def on_scores(self, scores: Sequence[ScoreRecord]) -> None:
        """ScoreListener: the leading daemon's own scores reach its windows at once."""
        if self._service is not None:
            self._service.on_scores(scores)

    def on_decisions(self, decisions: Sequence[DecisionRecord]) -> None:
        """DecisionListener: as :meth:`on_scores`, for coverage monitors."""
        if self._service is not None:
            self._service.on_decisions(decisions)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._lead(), name="monitors-leader")

    async def stop(self, deadline: float) -> bool:
        await cancel([self._task])
        service, self._service = self._service, None
        if service is None:
            return True
        drained = await service.stop(deadline)
        await self._leadership.release()
        return drained

    async def _lead(self) -> None:
        while True:
            try:
                if self._service is None:
                    if await self._leadership.try_acquire():
                        service = self._build()
                        try:
                            await service.start()
                        except BaseException:
                            await self._leadership.release()  # taken again next round
                            raise
                        self._service = service
                        log.info("this daemon runs the monitors (it holds their PostgreSQL advisory lock)")
                elif not await self._leadership.held():
                    log.error("lost the monitors' advisory lock (PostgreSQL connection); another daemon takes over")
                    service, self._service = self._service, None
                    await service.stop(time.monotonic() + 5.0)
            except Exception:
                log.exception("monitor leadership check failed")
            await asyncio.sleep(self._check_s)
