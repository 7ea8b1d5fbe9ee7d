"""A worker process: ``python -m tracescorer.workers.child --fd N --store-fd M --index K --count C``.

Started by :class:`~tracescorer.workers.pool.WorkerPool`; with ``workers.count: 0`` the one worker
runs on the daemon's own event loop (:func:`serve`), over the same channel and messages. It takes its partition ``K`` of ``C``
of the traces (:mod:`tracescorer.feed.partition`) from the segment log the main process writes
(:class:`~tracescorer.seglog.LogView`), stores their span rows through its own connection to the
store process (``--store-fd``), assembles, extracts runs and scores them
(:class:`~tracescorer.workers.pipeline.Pipeline`), and tells the main process how far it is, the
scores it committed and its metrics (:mod:`tracescorer.workers.messages`). It ignores SIGINT and
SIGTERM: the main process stops it (``STOP``), or its end of the socket closes (the main process
is gone) and it stops as at a stop. It exits with :data:`~.messages.EXIT_STORE_LOST` when its
store connection is lost; the main process starts it again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from tracescorer import logs
from tracescorer.assembly.idle import LocalIdleConversations
from tracescorer.clock import SYSTEM_CLOCK, Clock
from tracescorer.config import Settings
from tracescorer.feed.partition import Partition
from tracescorer.ipc import AsyncChannel, encode
from tracescorer.lifecycle import Stages
from tracescorer.metrics import Metrics
from tracescorer.records.scores import DecisionRecord, ScoreRecord
from tracescorer.runner.bindings import BindingError, build_bindings
from tracescorer.runner.recovery import RecoveryScope
from tracescorer.runtime import tune_gc
from tracescorer.seglog import LogView
from tracescorer.store.factory import build_worker_stores
from tracescorer.workers import messages as m
from tracescorer.workers.pipeline import Pipeline, build_runner

log = logging.getLogger("tracescorer.workers")

#: how often progress is told while it moves (and at least every second); metrics every 2 s, or
#: every half second while the feed moves (a test or an operator reads them right after the load)
PROGRESS_S, METRICS_S, METRICS_MOVING_S = 0.2, 2.0, 0.5
#: how long a worker whose daemon went away takes to stop (the next daemon replays the log)
ORPHAN_STOP_S = 3.0


class _ScoresOut:
    """Score rows committed here, told to the main process (its exporter, monitors, metrics), and
    decision rows when a coverage monitor counts them (``decisions``)."""

    def __init__(self, channel: AsyncChannel, *, decisions: bool) -> None:
        self._channel = channel
        self.decisions = decisions

    def on_scores(self, scores: Sequence[ScoreRecord]) -> None:
        self._channel.send(encode((m.SCORES, list(scores))))

    def on_decisions(self, decisions: Sequence[DecisionRecord]) -> None:
        if self.decisions:
            self._channel.send(encode((m.DECISIONS, list(decisions))))


class Worker:
    """One worker process's stages (see the module docstring)."""

    def __init__(
        self,
        channel: AsyncChannel,
        start: m.Start,
        store_fd: int,
        partition: Partition,
        *,
        clock: Clock = SYSTEM_CLOCK,
        own_process: bool = True,
    ) -> None:
        s = start.settings
        self.channel = channel
        self.name = f"w{partition.index}"
        self.own_process = own_process  # False: on the daemon's loop, its CPU and memory are the daemon's
        self.metrics = Metrics(score_buckets=s.score_metrics.buckets)
        self.stores = build_worker_stores(s, self.metrics, attach_fd=store_fd, owner=start.owner)
        self.view = LogView(start.log_dir)
        self.view.advance(start.end)
        # this worker's runs and conversations left unscored (also those of its own previous life)
        recovery = RecoveryScope(owns=partition.owns_hex, owns_conversation=partition.owns_conversation)
        self.out = _ScoresOut(channel, decisions=any(mon.aggregate == "coverage" for mon in s.monitors))
        self.runner = build_runner(
            s, self.stores, self.metrics, [self.out], recovery=recovery, shared_spend=True, clock=clock
        )
        self.pipeline = Pipeline(
            s,
            self.stores,
            self.metrics,
            self.view,
            self.runner,
            partition=partition,
            clock=clock,
            turns=lambda ids: channel.send(encode((m.TURNS, ids))),
        )
        # the daemon's agreement gauges follow other tools' evaluations stored here
        self.pipeline.evaluations.on_evaluations.append(lambda: channel.send(encode((m.EVALUATIONS, None))))
        self.metrics.track_queue(lambda: self.stores.intake.pending_items)  # the feed writes here
        self.grace_s = s.shutdown.grace_s
        self._deadline = 0.0

    def progress(self) -> m.Progress:
        feed = self.pipeline.feed
        return m.Progress(
            feed.offset,
            self.view.keep_from,
            feed.lag_s,
            feed.held_by,
            feed.failure,
            self.stores.health.write_failure,
            self.stores.intake.pending_items,
        )

    async def run(self) -> int:
        """Start, serve until told to stop (or the main process is gone), stop; the exit status."""
        stages = Stages(lambda: self._deadline)
        self._deadline = time.monotonic() + self.grace_s
        reserve = min(5.0, self.grace_s * 0.2)
        try:
            for component in self.stores.components:
                await stages.enter(component)
            await self.pipeline.enter_idler(stages, reserve_s=reserve)
            await stages.enter(self.runner, reserve_s=reserve + 1.0)
            await self.pipeline.enter_intake(stages, reserve_s=reserve)
        except BaseException:
            log.exception("worker %s could not start", self.name)
            await stages.aclose()
            return 1
        self.channel.send(encode((m.READY, self.progress())))
        reporter = asyncio.create_task(self._report(), name="worker-report")
        status = await self._serve()
        reporter.cancel()
        if status == m.EXIT_STORE_LOST:
            log.error("worker %s lost its store connection; exiting to be started again", self.name)
        drained = False
        try:
            await stages.aclose()
            drained = True
        finally:
            self.channel.send(encode((m.PROGRESS, self.progress())))
            self.channel.send(encode((m.STOPPED, drained)))
        return status

    async def _serve(self) -> int:
        recv = asyncio.ensure_future(self.channel.recv())
        lost = asyncio.ensure_future(self.stores.lost.wait()) if self.stores.lost is not None else None
        try:
            while True:
                waiting = [recv] if lost is None else [recv, lost]
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if lost is not None and lost.done():
                    self._deadline = time.monotonic() + 1.0
                    return m.EXIT_STORE_LOST
                message = recv.result()
                if message is None:  # the main process is gone: stop soon (what is acknowledged is in the log)
                    log.warning("worker %s: the daemon went away; stopping", self.name)
                    self._deadline = time.monotonic() + min(self.grace_s, ORPHAN_STOP_S)
                    return 0
                kind, value = message
                if kind == m.END:
                    self.view.advance(*value)
                elif kind == m.SNAPSHOT:
                    self.send_metrics()
                elif kind == m.TURNS and isinstance(self.pipeline.conversations, LocalIdleConversations):
                    self.pipeline.conversations.on_turns(value)
                elif kind == m.RELOAD:
                    await self.reload(value)
                elif kind == m.STOP:
                    self._deadline = time.monotonic() + float(value)
                    return 0
                recv = asyncio.ensure_future(self.channel.recv())
        finally:
            for task in (recv, lost):
                if task is not None and not task.done():
                    task.cancel()

    async def reload(self, settings: Settings) -> None:
        """Apply this worker's share of a reloaded configuration: its scorers (decisions from now
        on; targets decided before finish with their binding), whether it tells decisions (coverage
        monitors), its log level; tell the main process (``RELOADED``)."""
        try:
            bound = await asyncio.to_thread(build_bindings, settings.scorers, settings.judge)
        except BindingError as exc:  # the main process built them: only a worker's own environment differs
            self.channel.send(encode((m.RELOADED, f"worker {self.name}: {exc}")))
            return
        self.runner.rebind(bound)
        self.out.decisions = any(mon.aggregate == "coverage" for mon in settings.monitors)
        if self.own_process:
            logs.set_level(settings.log.level)
        self.channel.send(encode((m.RELOADED, None)))

    async def _report(self) -> None:
        told, told_at, metrics_at, metrics_offset = None, 0.0, 0.0, -1
        while True:
            await asyncio.sleep(PROGRESS_S)
            now = time.monotonic()
            progress = self.progress()
            if progress != told or now - told_at >= 1.0:
                self.channel.send(encode((m.PROGRESS, progress)))
                told, told_at = progress, now
            every = METRICS_MOVING_S if progress.offset != metrics_offset else METRICS_S
            if now - metrics_at >= every:
                self.send_metrics()
                metrics_at, metrics_offset = now, progress.offset

    def send_metrics(self) -> None:
        """Tell the main process this worker's metrics, as of its feed's offset now."""
        snapshot = self.metrics.snapshot()
        if not self.own_process:
            snapshot = dataclasses.replace(snapshot, cpu_seconds=None, resident_bytes=None)
        self.channel.send(encode((m.METRICS, (self.pipeline.feed.offset, snapshot))))


async def serve(
    sock: socket.socket,
    store_fd: int,
    partition: Partition,
    *,
    clock: Clock = SYSTEM_CLOCK,
    own_process: bool = True,
    made: Callable[[Worker], None] | None = None,
) -> int:
    """Be a worker over ``sock`` (its end of the channel to the main process) until told to stop;
    the exit status. ``own_process``: in a process of its own (it configures its logging);
    ``made``: told of the worker once built (the daemon keeps its in-process one)."""
    channel = await AsyncChannel.open(sock)
    first = await channel.recv()
    if first is None or first[0] != m.START:
        return 1
    start: m.Start = first[1]
    if own_process:
        logs.configure(start.log_level, start.log_format)  # type: ignore[arg-type]
    worker = Worker(channel, start, store_fd, partition, clock=clock, own_process=own_process)
    if made is not None:
        made(worker)
    status = await worker.run()
    worker.send_metrics()
    await asyncio.sleep(0)  # let the sender write what is queued
    await channel.drain()
    channel.close()
    return status


class WorkerProcess(Protocol):
    """What the pool needs of a worker's process: an OS process, or :class:`InProcess`."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | None: ...
    async def wait(self) -> int: ...
    def kill(self) -> None: ...


class InProcess:
    """The one worker of ``workers.count: 0``, served on the daemon's loop (:func:`serve`)."""

    def __init__(self, sock: socket.socket, store_fd: int, partition: Partition, clock: Clock) -> None:
        self.pid = os.getpid()
        self.worker: Worker | None = None
        self._task = asyncio.create_task(
            serve(sock, store_fd, partition, clock=clock, own_process=False, made=self._made),
            name="worker-w0",
        )

    def _made(self, worker: Worker) -> None:
        self.worker = worker

    @property
    def returncode(self) -> int | None:
        if not self._task.done():
            return None
        return 1 if self._task.cancelled() or self._task.exception() is not None else self._task.result()

    async def wait(self) -> int:
        await asyncio.wait([self._task])
        if not self._task.cancelled() and self._task.exception() is not None:
            log.error("worker w0 failed", exc_info=self._task.exception())
        code = self.returncode
        assert code is not None
        return code

    def kill(self) -> None:
        self._task.cancel()


async def launch(
    sock: socket.socket, store_sock: socket.socket, partition: Partition, *, in_process: bool, clock: Clock
) -> WorkerProcess:
    """Start a worker over ``sock`` (its end of the channel) and ``store_sock`` (its store
    channel), both handed over: a process of its own, or on this loop (``in_process``, with
    ``clock``)."""
    if in_process:
        return InProcess(sock, store_sock.detach(), partition, clock)
    try:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tracescorer.workers.child",
            "--fd",
            str(sock.fileno()),
            "--store-fd",
            str(store_sock.fileno()),
            "--index",
            str(partition.index),
            "--count",
            str(partition.count),
            pass_fds=(sock.fileno(), store_sock.fileno()),
            stdin=asyncio.subprocess.DEVNULL,
        )
    finally:
        sock.close()
        store_sock.close()


def main(argv: list[str] | None = None) -> None:
    """Entry point (the main process starts it; see the module docstring)."""
    import argparse

    parser = argparse.ArgumentParser(prog="tracescorer-worker")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--store-fd", type=int, required=True)
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    args = parser.parse_args(argv)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # the main process decides
        signal.signal(sig, signal.SIG_IGN)
    os.umask(0o077)
    tune_gc()  # most of the daemon's Python runs here: a trace buffer of live objects, runs, scores
    try:
        sock = socket.socket(fileno=args.fd)
        status = asyncio.run(serve(sock, args.store_fd, Partition(args.index, args.count)))
    except BaseException:
        log.exception("the worker process failed")
        status = 1
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
