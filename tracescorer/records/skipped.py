"""What triage skipped: the rows of ``skipped_traces`` (written by the segment log's feed)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class SkippedTrace:
    """Items of one trace a request had that no convention could use (never decoded, never
    stored): how many spans and log records, the service that sent them, the request's log offset.
    A trace has a row per request it had items skipped in."""

    trace_id: str
    service_name: str | None
    span_count: int
    log_count: int
    log_offset: int
