"""Batch mode (``mode: batch``): judge requests answered in provider batches, at the batch price.

A batch-mode binding's targets run in a pool of their own (``judge.batch.max_pending`` runs; the
:class:`Batcher` owns it), with :data:`~tracescorer.scorers.batching.BATCH` set to the batcher: the
scorer runs as ever, and each judge request waits in :meth:`Batcher.ask` for its line of a batch.
Requests to one model and endpoint are gathered for ``collect_s`` (or until ``max_size``), then
the batch is recorded in the store's ``judge_batches`` as an ``intent`` (our id, the requests'
keys), submitted with our id in its metadata, recorded ``submitted`` with the provider's id, and
polled every ``poll_s``; its lines answer the waiting requests. A batch not done ``max_wait_s``
after it was submitted is cancelled and its requests are sent live.

Across restarts nothing is submitted twice: a target whose request waited gets no decision, so the
next start's recovery scores it again; its request (the same key) finds the open batch loaded from
the store and waits for that batch's lines (an ``intent`` is first looked up by its metadata at the
provider: found, it is polled; not found, it never reached the provider and its requests are
gathered anew). The lines of a finished batch stay until asked for, so recovered requests that
arrive after it finished are answered too. Errors per request are raised as the provider's status
(:class:`~tracescorer.scorers.batching.BatchRequestError`): the heal classes apply.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tracescorer.aio import cancel
from tracescorer.clock import SYSTEM_CLOCK, Clock
from tracescorer.config.scoring import JudgeSettings
from tracescorer.records.judge_batches import JudgeBatchRecord
from tracescorer.runner.bindings import BoundScorer
from tracescorer.runner.pool import WorkerPool
from tracescorer.scorers import batching
from tracescorer.scorers.processors import ChatMessage
from tracescorer.scorers.reuse import request_key
from tracescorer.store.api import ScoreStore

log = logging.getLogger(__name__)

# open batches older than this at start are closed: the provider's completion window is 24 hours
STALE_S = 48 * 3600.0
_AGAIN = "again"  # the batch never reached the provider: gather the request anew


@dataclass(eq=False, kw_only=True)
class _Batch:
    id: str
    model: str
    status: str  # collecting, intent, submitted, closed
    created_at: float
    provider_id: str | None = None
    keys: list[str] = field(default_factory=list)
    lines: list[dict[str, Any]] = field(default_factory=list)  # while collecting
    waiters: dict[str, list[asyncio.Future[Any]]] = field(default_factory=dict)
    results: dict[str, Mapping[str, Any]] | None = None  # once done: lines not yet asked for
    again: bool = False
    conn: dict[str, Any] | None = None
    task: asyncio.Task[None] | None = None
    full: asyncio.Event = field(default_factory=asyncio.Event)

    def record(self) -> JudgeBatchRecord:
        return JudgeBatchRecord(
            id=self.id,
            model=self.model,
            status=self.status,
            request_keys=tuple(self.keys),
            created_at=self.created_at,
            provider_batch_id=self.provider_id,
        )


class Batcher:
    """Gathers, submits and polls the provider batches of batch-mode bindings, and runs those
    bindings' targets (``handle``) in its pool; a lifecycle component (start/stop)."""

    def __init__(
        self,
        scores: ScoreStore,
        judge: JudgeSettings,
        handle: Callable[[Any], Awaitable[None]],
        *,
        max_queue: int,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._scores = scores
        self._mode = judge.mode
        self._settings = judge.batch
        self._clock = clock
        self._run = handle
        self._pool: WorkerPool[Any] = WorkerPool(
            "batch", workers=judge.batch.max_pending, max_queue=max_queue, handle=self._handle
        )
        self._by_key: dict[str, _Batch] = {}
        self._collecting: dict[str, _Batch] = {}
        self._stopped = False

    def pool_of(self, bound: BoundScorer) -> WorkerPool[Any] | None:
        """The pool of a batch-mode judge binding's targets (started at its first), else None."""
        if not bound.uses_judge or (bound.binding.mode or self._mode) != "batch":
            return None
        if not self._stopped:
            self._pool.start()
        return self._pool

    async def _handle(self, item: Any) -> None:
        token = batching.BATCH.set(self)
        try:
            await self._run(item)
        finally:
            batching.BATCH.reset(token)

    async def start(self) -> None:
        """Load the open batches: the requests of restarted targets find them."""
        for record in await self._scores.open_judge_batches():
            batch = _Batch(
                id=record.id,
                model=record.model,
                status=record.status,
                created_at=record.created_at,
                provider_id=record.provider_batch_id,
                keys=list(record.request_keys),
            )
            if self._clock.time() - record.created_at > STALE_S:
                batch.status = "closed"
                await self._scores.put_judge_batch(batch.record())
                continue
            for key in batch.keys:
                self._by_key[key] = batch
        if self._by_key:
            log.info("%d judge request(s) in open provider batches", len(self._by_key))

    async def stop(self, deadline: float) -> bool:
        """Stop at once: runs waiting for a batch are abandoned (the next start's recovery scores
        them, and their requests find the batch again); True when none was."""
        self._stopped = True
        left = await self._pool.shutdown(0)
        for item in left:  # the runner's tasks: their callers stop waiting
            done = getattr(item, "done", None)
            if isinstance(done, asyncio.Future) and not done.done():
                done.cancel()
        await cancel([b.task for b in {*self._by_key.values(), *self._collecting.values()} if b.task])
        return not left

    # --- the judge's side ----------------------------------------------------------------------

    async def ask(self, litellm: Any, model: str, messages: list[ChatMessage], options: dict[str, Any]) -> Any | None:
        """:meth:`~tracescorer.scorers.batching.BatchQueue.ask`."""
        if batching.provider_of(litellm, model) not in batching.PROVIDERS:
            return None
        key = request_key(model, messages, options)
        conn = batching.connection(options)
        while True:
            batch = self._by_key.get(key)
            if batch is not None and batch.status == "closed":
                line = (batch.results or {}).pop(key, None)
                del self._by_key[key]
                if line is not None:  # a finished batch's line, asked for after it finished
                    return batching.response_of(litellm, model, line)
                batch = None
            if batch is None:
                batch = self._collect(model, conn)
                batch.keys.append(key)
                batch.lines.append(batching.request_line(litellm, key, model, messages, options))
                self._by_key[key] = batch
                if len(batch.keys) >= self._settings.max_size:
                    batch.full.set()
                    self._collecting.pop(self._group(model, conn), None)
            waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            batch.waiters.setdefault(key, []).append(waiter)
            if batch.task is None:
                batch.conn = conn
                batch.task = asyncio.create_task(self._drive(litellm, batch), name=f"judge-batch-{batch.id}")
            outcome = await waiter
            if outcome == _AGAIN:
                continue
            if outcome is None:
                return None
            return batching.response_of(litellm, model, outcome)

    def _group(self, model: str, conn: Mapping[str, Any]) -> str:
        return json.dumps([model, conn], sort_keys=True, default=repr)

    def _collect(self, model: str, conn: Mapping[str, Any]) -> _Batch:
        group = self._group(model, conn)
        batch = self._collecting.get(group)
        if batch is None:
            batch = _Batch(id=f"tsb-{uuid.uuid4().hex}", model=model, status="collecting", created_at=0.0)
            self._collecting[group] = batch
        return batch

    # --- one batch, from gathering to its results --------------------------------------------

    async def _drive(self, litellm: Any, batch: _Batch) -> None:
        try:
            if batch.status == "collecting":
                try:
                    await asyncio.wait_for(batch.full.wait(), self._settings.collect_s)
                except TimeoutError:
                    pass
                if not await self._submit(litellm, batch):
                    return
            elif batch.status == "intent":
                assert batch.conn is not None
                found = await batching.find(litellm, batch.id, batch.conn)
                if found is None:  # it never reached the provider
                    await self._close(batch, again=True)
                    return
                batch.provider_id, batch.status = found, "submitted"
                await self._scores.put_judge_batch(batch.record())
            await self._poll(litellm, batch)
        except asyncio.CancelledError:
            raise
        except Exception:  # the batch's requests go live rather than wait for nothing
            log.exception("judge batch %s failed: its requests are sent live", batch.id)
            await self._close(batch)

    async def _submit(self, litellm: Any, batch: _Batch) -> bool:
        assert batch.conn is not None
        self._collecting.pop(self._group(batch.model, batch.conn), None)
        batch.status, batch.created_at = "intent", self._clock.time()
        await self._scores.put_judge_batch(batch.record())  # before the provider may hold it
        try:
            batch.provider_id = await batching.submit(litellm, batch.id, batch.lines, batch.conn)
        except Exception as exc:  # noqa: BLE001 - did it reach the provider? Ask before going live
            log.warning("submitting judge batch %s failed (%s)", batch.id, exc)
            batch.provider_id = await batching.find(litellm, batch.id, batch.conn)
            if batch.provider_id is None:
                await self._close(batch)
                return False
        batch.status, batch.lines = "submitted", []
        await self._scores.put_judge_batch(batch.record())
        log.info("judge batch %s: %d request(s) submitted as %s", batch.id, len(batch.keys), batch.provider_id)
        return True

    async def _poll(self, litellm: Any, batch: _Batch) -> None:
        assert batch.conn is not None and batch.provider_id is not None
        while True:
            try:
                polled = await batching.poll(litellm, batch.provider_id, batch.conn)
            except Exception as exc:  # noqa: BLE001 - asked again at the next poll
                log.warning("polling judge batch %s failed: %s", batch.id, exc)
            else:
                if polled.done:
                    batch.results = dict(polled.lines)
                    await self._close(batch)
                    return
            left = self._settings.max_wait_s - (self._clock.time() - batch.created_at)
            if left <= 0:
                log.warning("judge batch %s not done in max_wait_s: its requests are sent live", batch.id)
                try:
                    await batching.cancel(litellm, batch.provider_id, batch.conn)
                except Exception as exc:  # noqa: BLE001 - it ends at its completion window anyway
                    log.warning("cancelling judge batch %s failed: %s", batch.id, exc)
                await self._close(batch)
                return
            await asyncio.sleep(min(self._settings.poll_s, left))

    async def _close(self, batch: _Batch, *, again: bool = False) -> None:
        """Record the batch closed and answer its waiting requests: its lines, ``_AGAIN`` or None (live)."""
        batch.status = "closed"
        if batch.conn is not None:
            self._collecting.pop(self._group(batch.model, batch.conn), None)
        try:
            await self._scores.put_judge_batch(batch.record())
        except Exception as exc:  # noqa: BLE001 - recorded at the next start's staleness check at worst
            log.warning("recording judge batch %s closed failed: %s", batch.id, exc)
        results = batch.results or {}
        for key, waiters in batch.waiters.items():
            line = results.pop(key, None)
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(_AGAIN if again else line)
                    if line is not None:  # one line, billed once: the same request's other waiters share it
                        line = {**line, batching.SHARED: True}
            if self._by_key.get(key) is batch and key not in results:
                del self._by_key[key]
        batch.waiters.clear()
