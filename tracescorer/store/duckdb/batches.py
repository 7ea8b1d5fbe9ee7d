"""The store process's write queues: the jobs waiting for a writer, how a writer takes one group
commit's worth of them, and how a batch's writes run.

Each writer of :class:`~tracescorer.store.duckdb.engine.Engine` (telemetry, stage) has a
:class:`WriteQueue`. A writer takes the oldest job and the jobs after it up to the batch bound,
except a job that must run alone (:func:`tracescorer.store.duckdb.jobs.alone`); a queue with a
delay lets its oldest job wait a little for others to commit with, unless a job someone waits on
to go on is queued (:func:`~tracescorer.store.duckdb.jobs.prompt`). The marks
:func:`~tracescorer.store.duckdb.jobs.coalescable` and :func:`~tracescorer.store.duckdb.jobs.hinted`
are read here: coalesced jobs run as one call, and a hinted job can be run again without its beliefs.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa

from tracescorer.store.duckdb.wire import WRITE

Connection = duckdb.DuckDBPyConnection


@dataclass(slots=True, eq=False)
class Job:
    """One request for a writer: its id, kind (telemetry or write), how many items it counts for
    in a batch, its payload, and (telemetry) its rows as Arrow tables once prepared."""

    req_id: int
    kind: str
    items: int
    payload: Any
    arrow: tuple[pa.Table | None, pa.Table | None, pa.Table | None] | None = None
    queued_at: float = 0.0


def drop_hints(job: Job) -> bool:
    """Turn a :func:`tracescorer.store.duckdb.jobs.hinted` write that believed some keys new into the
    same write believing none (True), for a retry after a primary-key violation; False otherwise."""
    count = getattr(job.payload[0], "hinted", 0) if job.kind == WRITE else 0
    if not count:
        return False
    fn, args = job.payload
    cut = len(args) - count
    if not any(any(hints) for hints in args[cut:]):
        return False
    job.payload = (fn, (*args[:cut], *([False] * len(hints) for hints in args[cut:])))
    return True


def is_prompt(job: Job) -> bool:
    """A write committed without the queue's delay (:func:`tracescorer.store.duckdb.jobs.prompt`)."""
    return job.kind == WRITE and getattr(job.payload[0], "prompt", False)


def runs_alone(job: Job) -> bool:
    """A write that gets a transaction of its own (:func:`tracescorer.store.duckdb.jobs.alone`)."""
    return job.kind == WRITE and getattr(job.payload[0], "alone", False)


@dataclass(slots=True)
class WriteQueue:
    """The jobs of one writer, oldest first; ``closing`` once the engine shuts down."""

    jobs: deque[Job] = field(default_factory=deque)
    cond: threading.Condition = field(default_factory=threading.Condition)
    closing: bool = False
    delay_s: float = 0.0  # how long the oldest job waits for others to commit with

    def take(self, max_items: int) -> list[Job] | None:
        """The next batch (blocks until there is one): the oldest job and those after it while
        their items stay within ``max_items``, a job that runs alone by itself. None once the
        queue is closing and empty."""
        with self.cond:
            while not self.jobs and not self.closing:
                self.cond.wait()
            if not self.jobs:
                return None
            if self.delay_s:
                until = self.jobs[0].queued_at + self.delay_s
                while (
                    not self.closing
                    and sum(job.items for job in self.jobs) < max_items
                    and not any(is_prompt(job) for job in self.jobs)
                    and (left := until - time.monotonic()) > 0
                ):
                    self.cond.wait(left)
            batch = [self.jobs.popleft()]
            if runs_alone(batch[0]):
                return batch
            size = batch[0].items
            while self.jobs and size + self.jobs[0].items <= max_items and not runs_alone(self.jobs[0]):
                job = self.jobs.popleft()
                size += job.items
                batch.append(job)
            return batch


def run_writes(con: Connection, batch: list[Job]) -> list[Any]:
    """Run the batch's write jobs; jobs of one coalescable op run as one call (first job's
    place), each getting that call's result."""
    merged: dict[Any, list[Job]] = {}
    for job in batch:
        if job.kind == WRITE and getattr(job.payload[0], "coalescable", False):
            merged.setdefault(job.payload[0], []).append(job)
    done: dict[int, Any] = {}
    for job in batch:
        if job.kind != WRITE or id(job) in done:
            continue
        fn, args = job.payload
        group = merged.get(fn, [job])
        if len(group) > 1:
            args = tuple([item for j in group for item in j.payload[1][i]] for i in range(len(args)))
        result = fn(con, *args)
        for j in group:
            done[id(j)] = result
    return [done.get(id(job)) for job in batch]
