"""Scores out to every configured sink, each with its own delivery state and retry schedule.

The ``scores`` table is the queue and ``score_deliveries`` the per-sink progress (see
:mod:`tracescorer.store.duckdb.deliveries`). One worker per sink works like the SDK's
``BatchSpanProcessor`` with the database as its buffer: it exports when ``batch_size`` new
scores were announced (:meth:`EvaluationExporter.notify`) or every ``interval_s``, claims the
oldest due score versions, hands them to its sink and records one outcome per score:

- delivered: done until the score is re-scored (a new version is delivered again, in place);
- retryable (unreachable, timeout, 408, 425, 429, 5xx): tried again after a backoff that doubles per
  attempt up to ``retry_max_s`` (or the backend's ``Retry-After``); a batch that failed entirely
  also pauses the sink for the same backoff, so an outage costs one request per backoff;
- rejected (other 4xx): tried ``max_rejected_attempts`` times with backoff, then ``failed``
  with the backend's error in ``last_error``, and later scores flow past it.

Sinks never hold each other back: a Phoenix outage leaves OTLP export running. Nothing is lost
across outages or restarts; ``scores.exported_at`` is set once every sink delivered a version.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from tracescorer.config import ExportSettings
from tracescorer.export.sink import ExportResult, ItemResult
from tracescorer.export.sinks import NamedSink, SinkPlan, build_sinks, describe, sink_keys
from tracescorer.lifecycle import seconds_left
from tracescorer.records import deliveries
from tracescorer.records.deliveries import Claim, DeliveryOutcome, DueScore
from tracescorer.runtime import default_owner
from tracescorer.store.api import DeliveryStore

log = logging.getLogger(__name__)

__all__ = ["DeliveryResult", "EvaluationExporter", "ExportObserver", "ExportOutcome", "SinkPlan"]

ExportOutcome = Literal["exported", "failed"]
DeliveryResult = Literal["delivered", "retry", "rejected", "failed"]
LEASE_S = 300.0  # a claim outlives any export attempt (sinks time out long before)


class ExportObserver(Protocol):
    """Told about every export attempt (called on the event loop; must not block or raise).

    ``on_export``: ``outcome`` ``"exported"`` (``count`` scores accepted) or ``"failed"``
    (``count`` not accepted this time), ``seconds`` the duration of the sink call.
    ``on_delivery``: per sink, how many scores were ``delivered``, will be retried (``retry``,
    ``rejected``) or were given up (``failed``).
    """

    def on_export(self, outcome: ExportOutcome, count: int, seconds: float) -> None: ...

    def on_delivery(self, sink: str, result: DeliveryResult, count: int) -> None: ...


class _NullObserver:
    def on_export(self, outcome: ExportOutcome, count: int, seconds: float) -> None:
        pass

    def on_delivery(self, sink: str, result: DeliveryResult, count: int) -> None:
        pass


class EvaluationExporter:
    """Exports stored scores to every configured sink; runs on the daemon's event loop.

    No method raises into its caller: failures are logged (once per failure streak per sink),
    counted via the observer and retried from the database.
    """

    def __init__(
        self,
        store: DeliveryStore,
        settings: ExportSettings,
        *,
        sinks: Sequence[NamedSink] | None = None,
        observer: ExportObserver | None = None,
        owner: str | None = None,
    ) -> None:
        """Raises :class:`~tracescorer.config.ConfigError` for bad sink settings or
        ``OTEL_EXPORTER_OTLP_*`` values. With ``settings.enabled`` false nothing is built and
        every method is a no-op."""
        self.store = store
        self.settings = settings
        self.observer: ExportObserver = observer or _NullObserver()
        self.owner = owner or default_owner()
        named = list(sinks) if sinks is not None else (build_sinks(settings) if settings.enabled else [])
        self.sink_ids = [n.id for n in named]
        self._workers = [_SinkWorker(n, self) for n in named]
        self._started = False
        self.stopped = False
        if named:
            log.info("evaluation export to %s", describe(named))

    @property
    def enabled(self) -> bool:
        return bool(self._workers)

    def sink(self, sink_id: str) -> Any:
        """The sink object with this id (None if not configured)."""
        return next((w.sink for w in self._workers if w.id == sink_id), None)

    async def start(self) -> None:
        """Start one export loop per sink (the first pass exports what earlier runs left)."""
        if self._started or self.stopped:
            return
        self._started = True
        for worker in self._workers:
            worker.start()

    def plan(self, settings: ExportSettings) -> SinkPlan:
        """The sinks of a reloaded ``export`` section, built (raises ConfigError); :meth:`apply` it."""
        keys = sink_keys(settings) if settings.enabled else {}
        now = sink_keys(self.settings) if self.settings.enabled else {}
        kept = {w.id for w in self._workers if keys.get(w.id) == now.get(w.id)}
        built = [n for n in (build_sinks(settings) if settings.enabled else []) if n.id not in kept]
        return SinkPlan(settings, list(keys), kept, built)

    async def apply(self, plan: SinkPlan) -> None:
        """Export to the sinks of ``plan``: a new or changed sink starts, one removed or changed stops
        once its delivery in flight ended (within ``export.timeout_s``), the others go on."""
        gone = [w for w in self._workers if w.id not in plan.kept]
        workers = {w.id: w for w in self._workers if w.id in plan.kept} | {
            n.id: _SinkWorker(n, self) for n in plan.built
        }
        self.settings, self.sink_ids = plan.settings, plan.ids
        self._workers = [workers[i] for i in plan.ids]
        for worker in self._workers:
            worker.settings = plan.settings
            if worker.id not in plan.kept and self._started and not self.stopped:
                worker.start()
        await asyncio.gather(*(w.shutdown(plan.settings.timeout_s, drain=False) for w in gone))
        if plan.built or gone:
            log.info(
                "evaluation export reloaded: %s", describe([NamedSink(w.id, w.sink) for w in self._workers]) or "none"
            )

    def notify(self, count: int = 1) -> None:
        """``count`` scores were written: export now once ``batch_size`` are waiting, else on the timer.

        Call on the event loop's thread; cheap, never blocks.
        """
        if self.stopped:
            return
        for worker in self._workers:
            worker.notify(count)

    def on_scores(self, scores: Sequence[Any]) -> None:
        """ScoreListener: new score rows were committed."""
        self.notify(len(scores))

    async def force_flush(self, timeout_s: float = 30.0) -> bool:
        """Export every pending score to every sink now, ignoring retry backoffs.

        True when no sink has anything pending left (rejected scores tried up to their bound and
        marked failed count as settled); False on a retryable failure, on timeout, after shutdown.
        """
        if not self._workers:
            return True
        if self.stopped:
            return False
        results = await asyncio.gather(*(w.flush(timeout_s, ignore_backoff=True) for w in self._workers))
        return all(results)

    async def stop(self, deadline: float) -> bool:
        """Stop intake, export what is due until ``deadline`` (monotonic seconds; at most
        ``export.timeout_s`` from now), then shut every sink down.

        Returns whether nothing due was left. Whatever is left stays in the database for the
        next start. Idempotent.
        """
        if not self._workers or self.stopped:
            return True
        self.stopped = True
        timeout_s = min(self.settings.timeout_s, seconds_left(deadline))
        results = await asyncio.gather(*(w.shutdown(timeout_s) for w in self._workers))
        return all(results)


class _SinkWorker:
    """The export loop of one sink."""

    def __init__(self, named: NamedSink, exporter: EvaluationExporter) -> None:
        self.id = named.id
        self.sink = named.sink
        self._exporter = exporter
        self.settings = exporter.settings
        self._stopping = False
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._flushes: set[asyncio.Task[bool]] = set()
        self._dirty = True  # at start, pick up whatever an earlier process left
        self._announced = 0
        self._failures = 0
        self._backoff_s = 0.0
        self._retry_at = 0.0
        self._next_due: float | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"export-{self.id}")

    def notify(self, count: int) -> None:
        self._dirty = True
        self._announced += max(count, 0)
        if self._announced >= self.settings.batch_size and time.monotonic() >= self._retry_at:
            self._wake.set()

    async def flush(self, timeout_s: float, *, ignore_backoff: bool) -> bool:
        deadline = time.monotonic() + timeout_s
        task = asyncio.create_task(self._drain(deadline, ignore_backoff), name=f"export-{self.id}-flush")
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
        return task in done and not task.cancelled() and task.result()

    async def shutdown(self, timeout_s: float, *, drain: bool = True) -> bool:
        """Stop the loop once its delivery in flight ended, export what is due (``drain``: not for
        a sink a reload removed), shut the sink down; within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=max(0.0, deadline - time.monotonic()))
        drained = await self.flush(max(0.0, deadline - time.monotonic()), ignore_backoff=False) if drain else True
        try:
            await asyncio.wait_for(self.sink.shutdown(), max(0.1, deadline - time.monotonic()))
        except Exception:  # a failing sink shutdown must not fail ours
            log.exception("export sink %s: shutdown failed", self.id)
        # past the deadline: abandon the wait; what was in flight is exported after the next start
        pending = [t for t in (self._task, *self._flushes) if t is not None and not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            log.warning("export sink %s: shutdown deadline passed with an export in flight", self.id)
        return drained and not pending

    # --- the loop ------------------------------------------------------------------------------

    async def _run(self) -> None:
        interval_s = self.settings.interval_s
        while not (self._exporter.stopped or self._stopping):
            now = time.monotonic()
            if self._failures:  # after a failure the backoff decides: retries slow down, then recover
                wait_s = max(0.0, self._retry_at - now)
            else:
                wait_s = interval_s if self._next_due is None else max(0.0, min(interval_s, self._next_due - now))
            try:
                await asyncio.wait_for(self._wake.wait(), wait_s)
            except TimeoutError:
                pass
            self._wake.clear()
            if self._exporter.stopped or self._stopping:
                break
            now = time.monotonic()
            due = self._dirty or (self._next_due is not None and now >= self._next_due)
            if due and now >= self._retry_at:
                await self._drain(None, ignore_backoff=False)

    async def _drain(self, deadline: float | None, ignore_backoff: bool) -> bool:
        """Export batches until nothing is due; True when nothing is left pending."""
        try:
            async with self._lock:
                while (deadline is None and not self._stopping) or time.monotonic() < (deadline or 0.0):
                    self._dirty = False
                    self._announced = 0
                    read, ok = await self._export_once(ignore_backoff)
                    if not ok:
                        self._dirty = True
                        return False
                    if read == 0 or (not ignore_backoff and read < self.settings.batch_size):
                        await self._refresh_next_due(nothing_read=read == 0)
                        return read == 0 or self._next_due is None
                return False
        except Exception:  # the loop must survive anything; the rows stay due
            log.exception("export sink %s: export pass failed", self.id)
            self._dirty = True
            return False

    async def _export_once(self, ignore_backoff: bool) -> tuple[int, bool]:
        """Claim, send and record one batch: (scores read, False on a failure worth backing off)."""
        store, exporter = self._exporter.store, self._exporter
        limit = self.settings.batch_size
        try:
            due: list[DueScore] = await store.due_deliveries(self.id, exporter.owner, limit, ignore_backoff)
            if not due:
                return 0, True
            claimed = await store.claim_deliveries(
                self.id, exporter.owner, LEASE_S, [Claim(score_id=d.id, version=d.version) for d in due]
            )
        except Exception as exc:  # noqa: BLE001 - store closed or failing: try again later
            self._failed("cannot read due scores: %s", exc)
            return -1, False
        batch = [d for d in due if d.id in claimed]
        if not batch:
            return len(due), True  # another daemon holds them
        started = time.perf_counter()
        try:
            results = list(await asyncio.wait_for(self.sink.export(batch), LEASE_S))
        except Exception as exc:  # sinks should not raise; some might
            log.debug("export sink %s raised", self.id, exc_info=True)
            results = [ItemResult(result=ExportResult.RETRY, error=f"{type(exc).__name__}: {exc}")] * len(batch)
        if len(results) != len(batch):
            results = [ItemResult(result=ExportResult.RETRY, error="sink returned a wrong number of results")] * len(
                batch
            )
        seconds = time.perf_counter() - started
        outcomes = [self._outcome(d, claimed[d.id], r) for d, r in zip(batch, results, strict=False)]
        self._observe(results, outcomes, seconds)
        try:
            await store.record_deliveries(self.id, exporter.owner, outcomes, exporter.sink_ids)
        except Exception as exc:  # noqa: BLE001 - sent but not recorded: sent again later (idempotent)
            self._failed("exported %d scores but cannot record it: %s", len(outcomes), exc)
            return -1, False
        if all(r.result is ExportResult.RETRY for r in results):
            self._failed("export of %d scores failed: %s", len(batch), results[0].error)
            return len(due), False
        self._succeeded()
        rejected = [(d, o) for d, o in zip(batch, outcomes, strict=False) if o.status == deliveries.FAILED]
        for d, o in rejected[:3]:
            log.warning("export sink %s: gave up on score %s after %d attempts: %s", self.id, d.id, o.attempts, o.error)
        return len(due), True

    def _outcome(self, score: DueScore, attempts_before: int, item: ItemResult) -> DeliveryOutcome:
        s = self.settings
        attempts = attempts_before + 1
        common: dict[str, Any] = {"score_id": score.id, "version": score.version, "attempts": attempts}
        if item.result is ExportResult.SUCCESS:
            return DeliveryOutcome(status=deliveries.DELIVERED, **common)
        if item.result is ExportResult.REJECTED and attempts >= s.max_rejected_attempts:
            return DeliveryOutcome(status=deliveries.FAILED, error=item.error, **common)
        backoff = min(s.retry_max_s, s.retry_initial_s * 2 ** min(attempts - 1, 30))
        if item.retry_after_s is not None:
            backoff = min(s.retry_max_s, max(item.retry_after_s, 0.0))
        return DeliveryOutcome(status=deliveries.PENDING, error=item.error, retry_in_s=backoff, **common)

    def _observe(self, results: Sequence[ItemResult], outcomes: Sequence[DeliveryOutcome], seconds: float) -> None:
        counts: dict[DeliveryResult, int] = {"delivered": 0, "retry": 0, "rejected": 0, "failed": 0}
        for r, o in zip(results, outcomes, strict=False):
            if o.status == deliveries.DELIVERED:
                counts["delivered"] += 1
            elif o.status == deliveries.FAILED:
                counts["failed"] += 1
            else:
                counts["rejected" if r.result is ExportResult.REJECTED else "retry"] += 1
        observer = self._exporter.observer
        try:
            if counts["delivered"]:
                observer.on_export("exported", counts["delivered"], seconds)
            if len(outcomes) - counts["delivered"]:
                observer.on_export("failed", len(outcomes) - counts["delivered"], seconds)
            for result, count in counts.items():
                if count:
                    observer.on_delivery(self.id, result, count)
        except Exception:  # metrics must not break export
            log.exception("export observer failed")

    async def _refresh_next_due(self, *, nothing_read: bool) -> None:
        try:
            due_in = await self._exporter.store.next_delivery_due_in(self.id)
        except Exception:  # noqa: BLE001 - only a wake-up hint; the timer covers it
            return
        if due_in is not None and due_in <= 0 and nothing_read:
            # due but not readable (another daemon's claim, its score deleted): the timer decides
            due_in = self.settings.interval_s
        self._next_due = None if due_in is None else time.monotonic() + due_in

    def _failed(self, message: str, *args: Any) -> None:
        s = self.settings
        self._failures += 1
        self._backoff_s = min(s.retry_max_s, self._backoff_s * 2 if self._backoff_s else s.retry_initial_s)
        self._retry_at = time.monotonic() + self._backoff_s
        if self._failures == 1:
            log.warning(
                "export sink %s: " + message + "; retrying with backoff (up to %gs)",  # noqa: G003 - message is a %-template
                self.id,
                *args,
                s.retry_max_s,
            )
        else:
            log.debug("export sink %s: " + message + " (failure %d in a row)", self.id, *args, self._failures)  # noqa: G003

    def _succeeded(self) -> None:
        if self._failures:
            log.info("export sink %s recovered after %d failed attempts", self.id, self._failures)
        self._failures = 0
        self._backoff_s = 0.0
        self._retry_at = 0.0
