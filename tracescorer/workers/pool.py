"""The main process's side of the workers: starting them, feeding them the log's end, hearing
how far they are, restarting one that died, stopping them.

The daemon's main process keeps the receivers, the segment log, the store and what reads results
(export, monitors, the healer, backfills); each worker (:mod:`tracescorer.workers.child`) takes its
partition of the traces from the log: ``workers.count`` processes, or with ``workers.count: 0``
one on the daemon's own loop (:class:`~tracescorer.workers.child.InProcess`: the same stages,
channel and messages; one topology for every count). The pool tells every worker how far the log
is synced, deletes segments every worker passed (once triage and ``retain_bytes`` no longer keep
them), hands the score rows the workers committed to the daemon's score listeners, tells each
conversation's owner of the runs other workers stored for it
(:func:`~tracescorer.feed.partition.conversation_owner`) and merges their metrics into the
daemon's. It is the feed's status for readiness (:class:`~tracescorer.daemon.readiness.Readiness`):
as far as its slowest worker; a worker that is down makes the daemon not ready until it is back.
A worker that exits unexpectedly (killed, crashed, its store connection lost) is started again
after a short backoff; it goes on from its saved offset and skips what it stored already, so
nothing acknowledged is lost or stored twice (:mod:`tracescorer.feed.consumers`).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tracescorer import logs
from tracescorer.aio import cancel
from tracescorer.clock import SYSTEM_CLOCK, Clock
from tracescorer.config import Settings
from tracescorer.feed.partition import Partition, conversation_owner
from tracescorer.ipc import AsyncChannel, encode
from tracescorer.lifecycle import seconds_left
from tracescorer.metrics import Metrics
from tracescorer.runner.writer import ScoreListener
from tracescorer.seglog import SegmentLog
from tracescorer.workers import child, fanout
from tracescorer.workers import messages as m
from tracescorer.workers.share import share

log = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0  # a worker's start: its store connection, recovery listing
RESTART_DELAYS_S = (0.5, 1.0, 2.0, 5.0, 10.0)
RELOAD_TIMEOUT_S = 30.0  # a worker's rebinding: building its scorers


@dataclass(slots=True)
class _Worker:
    index: int
    process: child.WorkerProcess | None = None
    channel: AsyncChannel | None = None
    progress: m.Progress | None = None
    metrics_offset: int = -1  # the feed offset its last metrics were taken at
    told_metrics: asyncio.Event = field(default_factory=asyncio.Event)  # set at each METRICS
    reloaded: asyncio.Future[str | None] | None = None  # its answer to the last RELOAD
    ready: asyncio.Future[bool] | None = None
    stopped: asyncio.Future[bool] | None = None
    reader: asyncio.Task[None] | None = None
    down: str | None = "starting"  # why it is not running, while it is not
    restarts: int = 0
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"w{self.index}"


class WorkerPool:
    """``count`` worker processes (see the module docstring); a :class:`~tracescorer.lifecycle.Component`."""

    def __init__(
        self,
        settings: Settings,
        segment_log: SegmentLog,
        attach: Callable[[], socket.socket],
        metrics: Metrics,
        *,
        count: int,
        owner: str,
        listeners: Sequence[ScoreListener] = (),
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._settings = settings
        self._in_process = count == 0  # one worker on the daemon's loop
        self._clock = clock  # the in-process worker's (a worker process has its own)
        self._log = segment_log
        self._attach = attach
        self._metrics = metrics
        self._owner = owner
        self.listeners = list(listeners)
        #: called when a worker stored other tools' evaluations (the agreement gauges' poke)
        self.on_evaluations: list[Callable[[], None]] = []
        self.workers = [_Worker(i) for i in range(max(1, count))]
        self._stopping = False
        self._told_end = 0
        self._tasks: list[asyncio.Task[None]] = []

    # --- the feed's status ------------------------------------------------------------------------

    @property
    def offset(self) -> int:
        """Every request before it was handled by every worker."""
        done = [w.progress.offset for w in self.workers if w.progress is not None]
        return min(done) if len(done) == len(self.workers) else self._log.start_offset

    @property
    def lag_bytes(self) -> int:
        """Bytes of acknowledged requests some worker has not handled yet."""
        return max(0, self._log.end_offset - self.offset)

    @property
    def lag_s(self) -> float:
        return max((w.progress.lag_s for w in self.workers if w.progress is not None), default=0.0)

    @property
    def held_by(self) -> str | None:
        """The first worker's stage holding its feed back, if any."""
        return next((f"{w.name} {w.progress.held_by}" for w in self.workers if w.progress and w.progress.held_by), None)

    @property
    def failure(self) -> str | None:
        """Why some worker's feed fails or a worker is down (None while every one runs well)."""
        for w in self.workers:
            if w.down is not None:
                return f"worker {w.name} is {w.down}"
            if w.progress is not None and w.progress.failure is not None:
                return f"worker {w.name}: {w.progress.failure}"
        return None

    @property
    def accepting(self) -> bool:
        return True  # Health: a worker whose store channel is gone exits, and is down (:attr:`failure`)

    @property
    def write_failure(self) -> str | None:
        """Health: why the store's writes fail, as a running worker's channel was last told (the
        daemon's own channel may not write for a long while: the workers write the feed's rows)."""
        running = [w.progress for w in self.workers if w.down is None and w.progress is not None]
        return next((p.write_failure for p in running if p.write_failure), None)

    @property
    def pending_items(self) -> int:
        """Readiness: the items waiting in the fullest running worker's store write queue."""
        return max((w.progress.pending_items for w in self.workers if w.down is None and w.progress), default=0)

    @property
    def max_queue_items(self) -> int:
        return self._settings.receiver.max_queue_items  # each worker's store channel's bound

    def describe(self) -> list[dict[str, object]]:
        """Each worker as ``/readyz`` tells of it: its pid, how far its feed is, whether it runs."""
        end = self._log.end_offset
        return [
            {
                "worker": w.name,
                "pid": w.process.pid if w.process is not None and w.down is None else None,
                "down": w.down,
                "lag_bytes": max(0, end - w.progress.offset) if w.progress is not None else None,
                "held_by": w.progress.held_by if w.progress is not None else None,
                "restarts": w.restarts,
            }
            for w in self.workers
        ]

    async def caught_up(self, timeout_s: float = 30.0) -> bool:
        """Wait until every request acknowledged before the call is handled by every worker (and
        the metrics they told since count it)."""
        target = self._log.end_offset
        deadline = time.monotonic() + timeout_s
        asked: set[int] = set()
        while any(w.down or w.metrics_offset < target for w in self.workers):
            if time.monotonic() > deadline:
                return False
            for w in self.workers:  # there: its metrics now, not at its next report
                if w.index not in asked and w.channel is not None and w.progress and w.progress.offset >= target:
                    asked.add(w.index)
                    w.channel.send(encode((m.SNAPSHOT, None)))
            await asyncio.sleep(0.02)
        return True

    # --- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every worker and wait until each is ready (raising, with none left running, when
        one cannot start)."""
        try:
            await asyncio.gather(*(self._spawn(w) for w in self.workers))
            for w in self.workers:
                assert w.ready is not None
                if not await asyncio.wait_for(asyncio.shield(w.ready), START_TIMEOUT_S):
                    raise RuntimeError(f"worker {w.name} could not start: {w.down} (see its log above)")
        except BaseException:
            self._stopping = True
            await self._kill_all()
            raise
        pids = ", ".join(str(w.process.pid) for w in self.workers if w.process is not None)
        if not self._in_process:
            log.info(
                "%d worker process(es) read the segment log, a share of the traces each (pids %s)",
                len(self.workers),
                pids,
            )
        self._tasks = [
            asyncio.create_task(self._tell_end(), name="workers-end"),
            asyncio.create_task(self._release(), name="workers-release"),
        ]

    async def stop(self, deadline: float) -> bool:
        """Tell every worker to stop (they drain until ``deadline``), wait for them, kill what is
        left a little after it."""
        self._stopping = True
        await cancel(self._tasks)
        for w in self.workers:
            await cancel(w.tasks)
            if w.channel is not None:
                w.channel.send(encode((m.STOP, seconds_left(deadline))))
        drained = True
        for w in self.workers:
            if w.process is None:
                continue
            try:
                await asyncio.wait_for(w.process.wait(), seconds_left(deadline) + 5.0)
            except TimeoutError:
                log.error("worker %s did not stop in time; killing it", w.name)
                w.process.kill()
                await w.process.wait()
                drained = False
            if w.reader is not None:
                await asyncio.wait([w.reader], timeout=2.0)
            if w.stopped is None or not w.stopped.done() or not w.stopped.result():
                drained = False
        await self._release_once()
        return drained

    async def _kill_all(self) -> None:
        for w in self.workers:
            if w.process is not None and w.process.returncode is None:
                w.process.kill()
                await w.process.wait()
            if w.channel is not None:
                w.channel.close()

    # --- one worker -------------------------------------------------------------------------------

    async def _spawn(self, w: _Worker) -> None:
        loop = asyncio.get_running_loop()
        w.ready, w.stopped = loop.create_future(), loop.create_future()  # progress: kept until it reports
        store_sock = self._attach()
        parent, theirs = socket.socketpair()
        partition = Partition(w.index, len(self.workers))
        w.process = await child.launch(theirs, store_sock, partition, in_process=self._in_process, clock=self._clock)
        w.channel = await AsyncChannel.open(parent)
        end = self._log.end_offset
        start = m.Start(
            settings=share(self._settings, len(self.workers)),
            owner=f"{self._owner}/{w.name}",
            log_dir=str(self._log.directory),
            end=end,
            log_level=logging.getLevelName(logging.getLogger("tracescorer").getEffectiveLevel()),
            log_format=logs.current_format(),
        )
        w.channel.send(encode((m.START, start)))
        w.reader = asyncio.create_task(self._read(w, w.channel, w.process), name=f"worker-{w.name}")

    async def _read(self, w: _Worker, channel: AsyncChannel, process: child.WorkerProcess) -> None:
        while (message := await channel.recv()) is not None:
            kind, value = message
            if kind in (m.PROGRESS, m.READY):
                w.progress = value
                if kind == m.READY:
                    w.down = None
                    assert w.ready is not None
                    if not w.ready.done():
                        w.ready.set_result(True)
                    channel.send(encode((m.END, (self._log.end_offset, time.time()))))
            elif kind == m.SCORES:
                fanout.tell_scores(self.listeners, value)
            elif kind == m.DECISIONS:
                fanout.tell_decisions(self.listeners, value)
            elif kind == m.TURNS:
                self._tell_owners(value)
            elif kind == m.EVALUATIONS:
                for callback in self.on_evaluations:
                    callback()
            elif kind == m.METRICS:
                w.metrics_offset, snapshot = value
                self._metrics.absorb(w.name, snapshot)
                w.told_metrics.set()
            elif kind == m.RELOADED and w.reloaded is not None and not w.reloaded.done():
                w.reloaded.set_result(value)
            elif kind == m.STOPPED and w.stopped is not None and not w.stopped.done():
                w.stopped.set_result(bool(value))
        channel.close()
        status = await process.wait()
        if w.reloaded is not None and not w.reloaded.done():  # it starts again with the new settings
            w.reloaded.set_result(f"worker {w.name} exited while reloading")
        self._metrics.retire(w.name, pid=process.pid)
        w.channel = None
        if w.ready is not None and not w.ready.done():
            w.down = f"not started (exit status {status})"
            w.ready.set_result(False)
            return
        if self._stopping:
            w.down = "stopped"
            return
        w.down = f"restarting (it exited with status {status})"
        log.error("worker %s exited unexpectedly with status %s; starting it again", w.name, status)
        w.tasks.append(asyncio.create_task(self._restart(w), name=f"worker-{w.name}-restart"))

    async def _restart(self, w: _Worker) -> None:
        attempt = 0
        while not self._stopping:
            await asyncio.sleep(RESTART_DELAYS_S[min(attempt, len(RESTART_DELAYS_S) - 1)])
            attempt += 1
            try:
                await self._spawn(w)
                assert w.ready is not None
                if await asyncio.wait_for(asyncio.shield(w.ready), START_TIMEOUT_S):
                    w.restarts += 1
                    self._metrics.worker_restarts.inc()
                    log.info("worker %s started again", w.name)
                    return
            except Exception as exc:  # noqa: BLE001 - keep trying; the daemon reports not ready meanwhile
                log.error("cannot start worker %s again: %s", w.name, exc)
                if w.process is not None and w.process.returncode is None:
                    w.process.kill()
                    await w.process.wait()
            # a failed start's reader set w.down; the next attempt starts it again

    async def reload(self, settings: Settings, timeout_s: float = RELOAD_TIMEOUT_S) -> list[str]:
        """Give every running worker (and any started from now on) its share of a reloaded
        configuration; what went wrong, per worker (empty when every one applied it)."""
        self._settings = settings
        frame = encode((m.RELOAD, share(settings, len(self.workers))))
        asked: dict[str, asyncio.Future[str | None]] = {}
        for w in self.workers:
            if w.channel is not None and w.down is None:
                asked[w.name] = w.reloaded = asyncio.get_running_loop().create_future()
                w.channel.send(frame)
        done = (await asyncio.wait(asked.values(), timeout=timeout_s))[0] if asked else set()
        late = [f"worker {name} did not answer in {timeout_s:g}s" for name, f in asked.items() if f not in done]
        return late + [str(f.result()) for f in done if f.result()]

    async def refresh_metrics(self, timeout_s: float = 0.5) -> None:
        """Ask every running worker for its metrics now and wait for them (up to ``timeout_s``):
        a scrape of ``/metrics`` shows the daemon as it is, not as it was a second ago."""
        asked = [w for w in self.workers if w.channel is not None and w.down is None]
        for w in asked:
            w.told_metrics.clear()
            w.channel.send(encode((m.SNAPSHOT, None)))  # type: ignore[union-attr]
        if asked:
            waits = [asyncio.create_task(w.told_metrics.wait()) for w in asked]
            await asyncio.wait(waits, timeout=timeout_s)
            await cancel(waits)

    def _tell_owners(self, conversation_ids: Sequence[str]) -> None:
        """Tell each conversation's owner that it got a run stored; an owner that is down hears
        nothing (its recovery finds the conversation when it starts again)."""
        owned: dict[int, list[str]] = {}
        for cid in conversation_ids:
            owned.setdefault(conversation_owner(cid, len(self.workers)), []).append(cid)
        for index, ids in owned.items():
            w = self.workers[index]
            if w.channel is not None and w.down is None:
                w.channel.send(encode((m.TURNS, ids)))

    # --- the log ----------------------------------------------------------------------------------

    async def _tell_end(self) -> None:
        """Tell every worker each time the log is synced further."""
        while True:
            await self._log.wait_beyond(self._told_end, 0.5)
            end = self._log.end_offset
            if end <= self._told_end:
                continue
            self._told_end = end
            frame = encode((m.END, (end, self._log.synced_at(end - 1) or time.time())))
            for w in self.workers:
                if w.channel is not None and w.down is None:
                    w.channel.send(frame)

    async def _release(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            await self._release_once()

    async def _release_once(self) -> None:
        """Delete the segments every worker passed (a worker that is down keeps what it last said)."""
        keep = [w.progress.keep_from for w in self.workers if w.progress is not None]
        if len(keep) < len(self.workers) or min(keep) <= self._log.start_offset:
            return
        released = await asyncio.to_thread(self._log.release_before, min(keep))
        if released:
            log.debug("segment log: released %d segment(s) before offset %d", released, min(keep))
