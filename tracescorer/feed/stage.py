"""The segment log's feeds: requests read back from the log become assembly's input, or span rows.

The receivers acknowledge a request once it is in the segment log (:mod:`tracescorer.seglog`);
everything after happens here, off the acknowledgement's path, a batch of records at a time. The
log is the only durable copy of telemetry until it is assembled, and a feed is one of two kinds:

* the **assembly feed** (one per worker's share): triage, decode, hand each item with the offset
  of its record to the listeners (assembly), store the traces triage skipped (counted, for
  ``explain``), save its offset. The saved offset holds back to the oldest record a trace not
  assembled yet needs, so the log keeps those records and a restart replays them; it releases
  the segments every reader passed (:mod:`tracescorer.feed.position`).
* the **span-rows feed** (``store.spans: agent | all``, ``rows=True``): a derived copy for SQL over
  spans. It stores span and log rows, each with its record's offset, a batch per transaction with
  its rows-through mark (a replay stores nothing twice), at lower priority than the pipeline (its
  gate), and is off every correctness path: the assembly feed keeps the log for it up to
  ``segment_log.max_lag_bytes`` behind itself; what falls further behind is released, and those
  rows are skipped, counted and logged.

A batch the store refuses for now (stopping, its process restarting, its queue full) is tried
again, never dropped; a damaged record (a disk fault: a checksum fails) is skipped, loudly.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from operator import methodcaller
from typing import Protocol, TypeVar

from tracescorer.aio import cancel
from tracescorer.feed.batch import Batch, Prefilter, decode_batch
from tracescorer.feed.consumers import Earlier
from tracescorer.feed.consumers import name as consumer_name
from tracescorer.feed.partition import Partition
from tracescorer.feed.position import Position
from tracescorer.feed.readback import record_at
from tracescorer.feed.recall import recall_handled
from tracescorer.feed.triage import Owns, Triage
from tracescorer.metrics import Metrics
from tracescorer.model import LogRecord, Span
from tracescorer.seglog import CorruptRecord, Damage, LogGap, LogReader, Record
from tracescorer.seglog.damage import report
from tracescorer.store.api import FeedState, Intake, StoreError

log = logging.getLogger(__name__)

RETRY_S = 0.5
T = TypeVar("T")


class TelemetryListener(Protocol):
    """Told about telemetry read from the segment log: each item with the offset of its record,
    when it was handled (``received``, epoch seconds) and whether it was acknowledged before this
    start (``replayed``: its traces stopped arriving when the last daemon stopped); called on the
    event loop; must not block."""

    def on_committed(
        self,
        spans: Sequence[Span],
        logs: Sequence[LogRecord],
        received: tuple[float, float],
        replayed: bool = False,
        span_offsets: Sequence[int] | None = None,
        log_offsets: Sequence[int] | None = None,
    ) -> None: ...

    def on_replayed(self) -> None:
        """Every request acknowledged before this start was handed on (the replay is over)."""


class LogFeed:
    """Reads the segment log from where it stopped (see the module docstring)."""

    def __init__(
        self,
        segment_log: LogReader,
        intake: Intake,
        state: FeedState,
        metrics: Metrics,
        *,
        max_batch_bytes: int = 4 << 20,
        listeners: Sequence[TelemetryListener] = (),
        retain_bytes: int = 0,
        max_retain_bytes: int = 1 << 30,
        triage: Triage | None = None,
        prefilter: Prefilter | None = None,
        partition: Partition | None = None,
        rows: bool = False,
    ) -> None:
        self._log = segment_log
        self.keep_rows = rows  # the span-rows feed (see the module docstring)
        self.partition = partition
        self.consumer = consumer_name(partition, rows=rows)  # this feed's name among the log's consumers
        self._intake = intake
        self._state = state
        self._metrics = metrics
        self._max_batch_bytes = max_batch_bytes
        self.position = Position(
            segment_log,
            state,
            self.consumer,
            releases=not rows,
            retain_bytes=retain_bytes,
            max_retain_bytes=max_retain_bytes,
        )
        self.triage = triage
        self._prefilter = prefilter
        self.listeners = list(listeners)
        self.offset = 0  # every request before it was handled
        self._stored_through: int | None = None  # requests up to this offset already have their rows
        self._replay_end = 0  # requests before it were acknowledged before this start
        self._replaying = False  # until the listeners heard that the replay is over
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._drain_until: float | None = None  # while stopping: go on reading until then
        self._gates: list[tuple[str, Callable[[], str | None]]] = []
        self.held_by: str | None = None  # the gate holding the feed back now
        self.lag_s = 0.0
        self.failure: str | None = None  # why the last batch failed, while batches fail

    def add_gate(self, stage: str, check: Callable[[], str | None]) -> None:
        """Hold the feed back while ``check()`` says ``stage`` is over its bound (its backlog stays
        in the segment log, on disk, not in memory; the receivers refuse new requests once the log
        is ``segment_log.max_lag_bytes`` ahead of the feed)."""
        self._gates.append((stage, check))

    def _held(self) -> str | None:
        if self._drain_until is not None:
            return None  # stopping: the stages take what is left while they still run
        for stage, check in self._gates:
            reason = check()
            if reason is not None:
                return f"{stage}: {reason}"
        return None

    async def caught_up(self, timeout_s: float = 30.0) -> bool:
        """Wait until every request acknowledged before the call is handled (its rows stored, its
        spans given to the listeners); whether that happened within ``timeout_s``."""
        target = self._log.end_offset
        deadline = time.monotonic() + timeout_s
        while self.offset < target:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    @property
    def lag_bytes(self) -> int:
        """Bytes of acknowledged requests not handled yet."""
        return max(0, self._log.end_offset - self.offset)

    # --- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        consumers = await self._state.feed_consumers()
        if not self.keep_rows:  # no rows: a consumer handed on everything before its saved offset
            consumers = {c: (saved, saved - 1 if saved else None) for c, (saved, _) in consumers.items()}
        self._earlier = Earlier(self.consumer, consumers)
        saved, self._stored_through = consumers.get(self.consumer, (self._earlier.start, None))
        self.offset = self.position.saved = max(saved, self._log.start_offset)
        if self.keep_rows and self.consumer in consumers and saved < self.offset:
            self.offset = saved
            self._fell_behind(self.position.saved)  # released while it was behind, before the last stop
        if self.consumer not in consumers:
            # known from now on: a feed that never moved its saved offset (held at its first
            # record) would otherwise start again where the others are, past its own traces
            await self._state.set_feed_offset(self.offset, consumer=self.consumer)
        self._replay_end = self._log.end_offset
        self._replaying = not self.keep_rows
        if not self.keep_rows:
            self._stored_through = await self._state.rows_through(consumer=self.consumer)  # skipped rows
        elif self._stored_through is not None and self._stored_through >= self.offset:
            log.info(
                "segment log feed: requests up to offset %d were stored before the last stop; going on after them",
                self._stored_through,
            )
        if self.triage is not None:
            recalled = await asyncio.to_thread(
                recall_handled, self._log, self.triage, self._handled, self._owner, self._max_batch_bytes
            )
            if recalled:
                log.info("triage: %d request(s) handled before the last stop read again for their traces", recalled)
        if behind := self.lag_bytes:
            log.info(
                "segment log feed: %d byte(s) of acknowledged requests to replay from offset %d", behind, self.offset
            )
        self._task = asyncio.create_task(self._run(), name="log-feed")

    async def stop(self, deadline: float) -> bool:
        """Store what the log holds until ``deadline`` (the receivers stopped before: it does not
        grow), then save the offset. What was not read by then stays in the log: the next start
        goes on from there. Whether everything was stored."""
        self._drain_until = deadline
        task = self._task
        if task is not None:
            _, pending = await asyncio.wait([task], timeout=max(0.0, deadline - time.monotonic()))
            if pending:
                self._stopping = True
                _, pending = await asyncio.wait([task], timeout=1.0)  # the batch being stored
                await cancel([task])
        self._stopping = True
        try:  # a store that no longer answers must not hold the stop past its deadline
            await asyncio.wait_for(self._save(force=True), max(1.0, deadline - time.monotonic()))
        except (StoreError, TimeoutError) as exc:
            log.warning(
                "segment log feed: could not save its offset at stop (%s); the next start replays a little more",
                str(exc) or "the store did not answer in time",
            )
        left = self.lag_bytes
        if left:
            log.info("segment log feed: %d byte(s) of acknowledged requests left in the log for the next start", left)
        return left == 0

    # --- the loop ----------------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            if self._replaying and self.offset >= self._replay_end:  # every request from before this start
                self._replaying = False
                self._tell(methodcaller("on_replayed"))
            if self._drain_until is not None and (
                self.offset >= self._log.end_offset or time.monotonic() >= self._drain_until
            ):
                return
            self.held_by = self._held()
            if self.held_by is not None:
                await asyncio.sleep(0.05)
                await self._save()
                continue
            if not await self._log.wait_beyond(self.offset, 0.5):
                await self._save()
                continue
            try:
                records = await asyncio.to_thread(self._log.read, self.offset, self._max_batch_bytes)
            except LogGap as exc:
                self._skip_damaged(exc)
                continue
            if not records:
                continue
            try:
                await self._handle(records)
            except Exception as exc:  # noqa: BLE001 - a bug: never end the feed silently, never store a batch twice
                if self._stopping and isinstance(exc, StoreError):
                    return  # the batch is read again at the next start
                await self._failed(exc)
                continue
            if self.failure is not None:
                log.info("segment log feed: going on again after %s", self.failure)
                self.failure = None

    async def _failed(self, exc: Exception) -> None:
        """Log a failed batch (once per streak), wait, and go on from the rows the store holds."""
        failure = f"{type(exc).__name__}: {exc}"
        if failure != self.failure:
            log.error("segment log feed: a batch failed (%s); trying again from what is stored", failure, exc_info=exc)
        self.failure = failure
        self._metrics.feed_failures.inc()
        await asyncio.sleep(RETRY_S)
        try:  # what the failed batch stored already is not stored again
            through = await self._state.rows_through(consumer=self.consumer)
            self._stored_through = through if self.keep_rows else max(through or -1, self._stored_through or -1)
        except StoreError:
            pass

    async def _handle(self, records: Sequence[Record]) -> None:
        if self.keep_rows and records[0].offset > self.offset:
            self._fell_behind(records[0].offset)
        if self._stored_through is not None and self.keep_rows:  # replay: these have their rows already
            fresh = [r for r in records if r.offset > self._stored_through]
            if len(fresh) < len(records):
                self.offset = records[-1].end if not fresh else fresh[0].offset
                records = fresh
            if not fresh:
                return
            self._stored_through = None
        batch = await asyncio.to_thread(
            decode_batch, records, self.triage, partial(record_at, self._log), self._prefilter, self._owner
        )
        self._metrics.stage_cpu.labels("decode").inc(batch.cpu_s)  # timed in the decoding thread
        if self.keep_rows:
            batch.skipped = []  # the assembly feed stores them
            if batch.spans or batch.logs:
                await self._retrying(self._store, batch)
        else:
            self._drop_stored(batch)
            for (signal, decision), n in batch.triaged.items():
                self._metrics.triage_items.labels(signal, decision).inc(n)
            if batch.lost_traces:
                self._metrics.triage_lost_traces.inc(batch.lost_traces)
            if batch.taken:
                await self._retrying(self._store_taken, batch)
            if batch.spans or batch.logs or batch.skipped:
                now = time.time()
                received = await self._retrying(self._store, batch) if batch.skipped else (now, now)
                await self._hand_on(batch, received)
        self.offset = batch.end
        synced = self._log.synced_at(records[-1].offset)
        self.lag_s = max(0.0, time.time() - synced) if synced is not None else 0.0
        if self.partition is None and not self.keep_rows:  # a worker's: the daemon shows its slowest worker's
            self._metrics.feed_lag_seconds.set(self.lag_s)
        await self._save()

    async def _hand_on(self, batch: Batch, received: tuple[float, float]) -> None:
        """Give the stored spans to the listeners a request at a time, waiting while a gate holds
        the feed back (a batch stores many requests at once; the stages take them at their pace)."""
        span_at = log_at = 0
        for span_end, log_end in batch.cuts:
            if span_end == span_at and log_end == log_at:
                continue
            while (held := self._held()) is not None:
                self.held_by = held
                await asyncio.sleep(0.05)
            self.held_by = None
            spans, logs = batch.spans[span_at:span_end], batch.logs[log_at:log_end]
            span_offsets, log_offsets = batch.span_offsets[span_at:span_end], batch.log_offsets[log_at:log_end]
            offset = span_offsets[0] if spans else log_offsets[0]
            span_at, log_at = span_end, log_end
            replayed, at = offset < self._replay_end, {"span_offsets": span_offsets, "log_offsets": log_offsets}
            self._tell(methodcaller("on_committed", spans, logs, received, replayed=replayed, **at))

    def _tell(self, call: Callable[[TelemetryListener], object]) -> None:
        for listener in self.listeners:
            try:
                call(listener)
            except Exception:  # a downstream stage must never stop the feed
                log.exception("telemetry listener %r failed", listener)

    async def _retrying(self, store: Callable[[Batch], Awaitable[T]], batch: Batch) -> T:
        """``store(batch)``, tried again until the store takes it (or the feed stops)."""
        delay = RETRY_S
        while True:
            try:
                return await store(batch)
            except StoreError as exc:
                if self._stopping:
                    raise
                log.debug("segment log feed: the store refused a batch for now (%s); trying again", exc)
                await asyncio.sleep(delay)
                delay = min(5.0, delay * 2)

    def _drop_stored(self, batch: Batch) -> None:
        """Every record is handed on again after a restart; the skipped traces' rows of those
        stored before are not stored again."""
        through = self._stored_through
        if through is not None and batch.skipped and batch.skipped[0].log_offset <= through:
            batch.skipped = [s for s in batch.skipped if s.log_offset > through]

    async def _store_taken(self, batch: Batch) -> None:
        assert self._prefilter is not None
        await self._prefilter.store(batch.taken)

    async def _store(self, batch: Batch) -> tuple[float, float]:
        outcome = await self._intake.append(
            batch.spans if self.keep_rows else (),
            batch.logs if self.keep_rows else (),
            span_offsets=batch.span_offsets,
            log_offsets=batch.log_offsets,
            skipped=batch.skipped,
            consumer=self.consumer,
        )
        if outcome.rejected:
            self._metrics.rejected.labels("traces", "store_refused").inc(outcome.rejected)
            log.warning("segment log feed: the store refused %d item(s): %s", outcome.rejected, outcome.message)
        return outcome.received_from, outcome.received_to

    async def _save(self, *, force: bool = False) -> None:
        skipped = self.triage.oldest_skipped_offset() if self.triage is not None else None
        await self.position.save(self.offset, force=force, skipped_from=skipped)

    def _fell_behind(self, to: int) -> None:
        """The span-rows feed found the log released past it (it fell ``max_retain_bytes`` behind
        the assembly feed): those rows are not stored; counted and logged."""
        self._metrics.span_rows_skipped_bytes.inc(to - self.offset)
        log.warning(
            "span rows: the log from offset %d to %d was released before its rows were stored "
            "(the span-rows feed fell segment_log.max_lag_bytes behind); those spans have no rows",
            self.offset,
            to,
        )
        self.offset = to

    def _handled(self, offset: int) -> bool:
        """Whether the request at ``offset`` was handled before this start."""
        return offset < self.offset or (self._stored_through is not None and offset <= self._stored_through)

    def _owner(self, offset: int) -> Owns | None:
        """Which traces this feed takes from the record at ``offset``: its partition's, less
        those another consumer stored already (after a change of the worker count)."""
        return self._earlier.owner(self.partition, offset)

    def _skip_damaged(self, exc: LogGap) -> None:
        """Go on after bytes without a record: only those. Damaged ones are reported by the first
        worker's assembly feed (every feed reads every record); a gap the log's open left was then."""
        first = self.partition is None or self.partition.index == 0
        if isinstance(exc, CorruptRecord) and first and not self.keep_rows:
            report(Damage.skipped(exc), "read", self._metrics)
        self.offset = exc.resume
