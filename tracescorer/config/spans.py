"""Where spans go behind the receiver: ``segment_log`` (appended before acknowledging),
``workers`` (the processes that read it), ``triage`` (with ``store.spans: agent``) and
``assembly`` (spans to complete traces and runs)."""

from __future__ import annotations

import os
from typing import Annotated, Literal

from pydantic import Field

from tracescorer.config.base import Section


class SegmentLogSettings(Section):
    """``segment_log``: where accepted requests are appended before they are acknowledged."""

    path: str | None = Field(
        None, description="directory of the segment files (default: store.path + '.log'; a temporary one for :memory:)"
    )
    segment_bytes: int = Field(64 << 20, ge=1 << 16, description="a segment file's size before the next starts")
    min_free_bytes: int = Field(
        64 << 20,
        ge=0,
        description="free disk space kept: appends are refused (retryable) below it; the store commits and "
        "checkpoints nothing while the disk of store.path has less than half of it free (0: no reserve)",
    )
    max_lag_bytes: int = Field(
        1 << 30,
        gt=0,
        description="acknowledged bytes the feed may be behind: past it new requests are refused (retryable)",
    )
    feed_batch_bytes: int = Field(4 << 20, gt=0, description="bytes of requests the feed stores in one transaction")
    retain_bytes: int = Field(0, ge=0, description="bytes kept after the feed passed them (for inspection)")
    sync: bool = Field(True, description="fdatasync before acknowledging (false only for tests and benchmarks)")


class WorkersSettings(Section):
    """``workers``: processes that read the segment log, each for its share of the trace ids
    (triage, span rows, assembly, runs, scoring), so the daemon uses more than one core."""

    count: Annotated[int, Field(ge=0)] | Literal["auto"] = Field(
        "auto",
        description="worker processes; 0: one worker on the daemon's own event loop; auto: one per core "
        "the daemon may use (0 on a single core)",
    )

    def resolved(self) -> int:
        """How many worker processes to start."""
        if self.count != "auto":
            return self.count
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return cores if cores > 1 else 0


class TriageSettings(Section):
    """``triage`` (with ``store.spans: agent``): how long a skipped trace is remembered, so its spans
    are read back from the segment log when its agent content comes later. A trace with agent
    content keeps its later spans for ``assembly.max_wait_s`` (``window_s`` if longer)."""

    window_s: float = Field(
        60, ge=0, description="a trace's skipped spans are read back when agent content follows within this"
    )
    max_traces: int = Field(100_000, gt=0, description="traces remembered at most (skipped ones, agent ones)")


class AssemblySettings(Section):
    idle_s: float = Field(5, gt=0)
    max_wait_s: float = Field(300, gt=0)
    conversation_idle_s: float = Field(900, gt=0)
    max_traces: int = Field(
        100_000, gt=0, description="traces tracked until complete; at it the feed waits (the backlog stays in the log)"
    )
    max_spans: int = Field(
        50_000, ge=0, description="spans + log records kept in memory; beyond: read back from the segment log"
    )
    max_lag_s: float = Field(
        10,
        gt=0,
        description="the feed waits while assembly takes complete traces later than this "
        "(the backlog stays in the segment log)",
    )
    conversation_keys: list[str] = []
