"""The store's own background passes: span-log retention, results retention, the key-index budget.

Span-log rows received more than ``store.retention_days`` ago (and their assembly records) are
deleted; results last written more than ``store.results_retention_days`` ago too. Span-log age
counts from ``received_at``: replayed captures and clients with skewed clocks would otherwise be
deleted on arrival. A store whose key indexes live in memory (DuckDB) also keeps them within
``store.index_memory_share`` of ``store.memory_limit``, deleting the oldest results, loudly.
A failed pass is logged and tried again at the next interval: maintenance never stops the daemon.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from tracescorer.aio import cancel
from tracescorer.store.api import ResultsPruned

if TYPE_CHECKING:
    from tracescorer.config import StoreSettings

log = logging.getLogger(__name__)


class Prunable(Protocol):
    """What retention asks of an engine."""

    async def prune_results(self, older_than: dt.datetime | None) -> ResultsPruned:
        """Delete results last written before ``older_than`` (None: only what the key-index budget
        asks); what was deleted."""


class SpanLogPrunable(Protocol):
    async def prune_span_log(self, older_than: dt.datetime) -> dict[str, int]:
        """Delete raw telemetry and assembly records received before ``older_than``; rows per table."""


class MaintenanceObserver(Protocol):
    """Told what each pass did (on the event loop; must not block)."""

    def on_retention(self, table: str, rows: int) -> None: ...

    def on_index_budget(self, keys: int | None, index_bytes: int | None) -> None: ...


class Maintenance:
    """Runs the passes of the module docstring while started.

    ``results`` are pruned by age; ``budget_only`` (postgres mode: the span log's own file, which
    holds the assembly records) only within their key-index budget.
    """

    def __init__(
        self,
        settings: StoreSettings,
        span_log: SpanLogPrunable,
        results: Sequence[Prunable],
        observer: MaintenanceObserver,
        *,
        budget_only: Sequence[Prunable] = (),
    ) -> None:
        self._settings = settings
        self._span_log = span_log
        self._results = list(results)
        self._budget_only = list(budget_only)
        self._observer = observer
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._retention_loop(), name="store-retention"),
            asyncio.create_task(self._budget_loop(), name="store-index-budget"),
        ]

    async def stop(self, deadline: float) -> bool:
        # a pass is a sequence of short transactions: cancelling between them loses nothing
        await cancel(self._tasks)
        self._tasks = []
        return True

    async def retention_pass(self, now: dt.datetime) -> None:
        s = self._settings
        self._count(await self._span_log.prune_span_log(now - dt.timedelta(days=s.retention_days)))
        if s.results_retention_days is not None:
            cutoff = now - dt.timedelta(days=s.results_retention_days)
            for part in self._results:
                self._pruned(await part.prune_results(cutoff))

    async def budget_pass(self) -> None:
        for part in (*self._results, *self._budget_only):
            self._pruned(await part.prune_results(None))

    async def _retention_loop(self) -> None:
        while True:
            try:
                await self.retention_pass(dt.datetime.now(dt.UTC))
            except Exception as exc:  # noqa: BLE001 - retention must never stop the daemon
                log.warning("retention pass failed: %s", exc)
            await asyncio.sleep(self._settings.retention_interval_s)

    async def _budget_loop(self) -> None:
        while True:
            await asyncio.sleep(self._settings.index_check_interval_s)
            try:
                await self.budget_pass()
            except Exception as exc:  # noqa: BLE001 - must never stop the daemon
                log.warning("index budget pass failed: %s", exc)

    def _count(self, deleted: dict[str, int], *, quiet: bool = False) -> None:
        for table, count in deleted.items():
            self._observer.on_retention(table, count)
            if count and not quiet:
                log.info("retention deleted %d rows from %s", count, table)

    def _pruned(self, pruned: ResultsPruned) -> None:
        if pruned.keys is not None or pruned.index_bytes is not None:
            self._observer.on_index_budget(pruned.keys, pruned.index_bytes)
        self._count(pruned.deleted, quiet=pruned.budget_cutoff is not None)  # the budget warns below, once
        if pruned.budget_cutoff is None:
            return
        s = self._settings
        log.warning(
            "the store's key indexes held %d keys, over their budget of %d (store.index_memory_share %g of "
            "store.memory_limit %s): deleted the results written before %s (%s; in %d "
            "transactions); raise store.memory_limit to keep more, or keep results in PostgreSQL",
            pruned.keys,
            pruned.max_keys,
            s.index_memory_share,
            s.memory_limit,
            pruned.budget_cutoff.isoformat(timespec="seconds"),
            ", ".join(f"{table} {n}" for table, n in pruned.deleted.items() if n) or "nothing",
            pruned.transactions,
        )
