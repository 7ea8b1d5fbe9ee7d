"""Assembly's progress through the span log: recovery at start and the assembled-through mark.

Recovery asks the span log for the traces of this feed's share that were never (fully) assembled
since its mark (less the store's recovery margin; a feed without a mark of its own starts from the
oldest mark of all) and tracks them in the buffer, in batches, so its bound holds; they complete
and are assembled like live ones. The mark — the first-seen time of the oldest trace still tracked
or being written — is stored now and then, so the next recovery reads only the recent end of the
span log. It is stored once recovery has listed everything (before, the traces of later batches
are in no buffer and a mark could pass them), and at once then, so a feed new to the store has a
mark of its own from its first start. Without span rows none of this runs: the feed keeps the
segment log from the oldest record a trace not assembled yet needs, and replays it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable

from tracescorer.assembly.buffer import AssembledTrace, TraceBuffer
from tracescorer.metrics import Metrics
from tracescorer.store.api import SpanLog, StoreError

log = logging.getLogger(__name__)

MARK_EVERY_S = 10.0
RETRY_MAX_S = 5.0  # the longest wait before a failed listing is tried again


class Progress:
    """Recovery (:meth:`recover`, run once at start) and the mark (:meth:`store_mark`)."""

    def __init__(
        self,
        span_log: SpanLog,
        buffer: TraceBuffer,
        metrics: Metrics,
        *,
        consumer: str,
        share: tuple[int, int] | None,
        tick_s: float,
        in_flight: Callable[[], Iterable[AssembledTrace]],
    ) -> None:
        self._span_log = span_log
        self._buffer = buffer
        self._metrics = metrics
        self._consumer = consumer  # the feed's name: its own mark
        self._share = share  # a worker process's share of the traces (index, count): what it recovers
        self._tick_s = tick_s
        self._in_flight = in_flight  # traces taken from the buffer whose assembly is not stored yet
        self._stored_at = 0.0
        self._recovered = False
        #: traces were handed out since the mark was stored (set by the stage)
        self.moved = False

    @property
    def mark_due(self) -> bool:
        return time.monotonic() - self._stored_at >= MARK_EVERY_S

    async def store_mark(self) -> None:
        """Store the assembled-through mark if traces moved since it was (an idle feed writes nothing)."""
        self._stored_at = time.monotonic()
        if not self.moved or not self._recovered:
            return
        self.moved = False
        times = [
            w for w in (self._buffer.oldest_received(), *(t.received[0] for t in self._in_flight())) if w is not None
        ]
        mark = min(times) if times else time.time()
        try:
            await self._span_log.set_assembled_through(dt.datetime.fromtimestamp(mark, dt.UTC), self._consumer)
        except BaseException:
            self.moved = True  # not stored: the next pass tries again
            raise

    async def recover(self, *, listing: bool = True, until: float | None = None) -> None:
        """Track the traces the span log holds that were never assembled (unless not ``listing``:
        without span rows the feed replays them), of the items stored before ``until`` (epoch s:
        this start; the items the feed stores from then on, replayed ones included, come to
        assembly from the feed, and listed too they were assembled twice); then store the mark if
        the feed has none yet (else at the next pass that moved traces: a restarted idle daemon
        writes nothing)."""
        try:
            known = await self._span_log.has_assembled_mark(self._consumer)
        except Exception:  # noqa: BLE001 - then it is stored once more, harmless
            known = False
        if listing:
            await self._list(until)
        self._recovered = True
        if known:
            return
        self.moved = True
        try:
            await self.store_mark()
        except Exception as exc:  # noqa: BLE001 - the stage's timer stores it at its next pass
            log.warning("storing the assembled-through mark failed (%s); retried at the next pass", exc)

    def _held(self, trace_ids: set[str]) -> bool:
        """Whether any of the traces is still tracked or its assembly not stored yet."""
        return any(self._buffer.tracking(t) for t in trace_ids) or any(
            t.trace_id in trace_ids for t in self._in_flight()
        )

    async def _list(self, until: float | None) -> None:
        seen: set[str] = set()
        total = 0
        batch = max(1, self._buffer.max_traces // 2)
        wait_s = 0.0
        while True:
            try:
                pending = await self._span_log.pending_traces(
                    limit=batch, consumer=self._consumer, share=self._share, until=until
                )
            except StoreError as exc:  # e.g. its process restarting: the mark waits, the listing is tried again
                if not wait_s:
                    log.warning("listing the traces to recover failed (%s); trying again until it works", exc)
                wait_s = min(RETRY_MAX_S, max(self._tick_s, wait_s * 2))
                await asyncio.sleep(wait_s)
                continue
            except Exception:  # a bug: live traffic goes on, recovery is given up
                log.exception("could not list unassembled traces")
                return
            wait_s = 0.0
            fresh = [p for p in pending if p[0] not in seen]
            if not fresh:
                break
            seen.update(p[0] for p in fresh)
            if not total:
                log.info("recovering traces not assembled before the last stop")
            total += self._buffer.add_pending(fresh)
            self._metrics.traces_recovered.inc(len(fresh))
            # wait until this batch is assembled and stored before asking for more: the buffer's
            # bound holds, and the next listing (oldest first) does not meet it again
            while self._held({p[0] for p in fresh}):  # noqa: ASYNC110 - nothing to wait on: polled each tick
                await asyncio.sleep(self._tick_s)
        if total:
            log.info("recovery: %d trace(s) queued for assembly", total)
