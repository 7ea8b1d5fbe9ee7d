"""A worker's settings: its share of what the daemon's configuration bounds.

Each worker process gets the daemon's in-memory bounds (assembly's traces and spans, triage's
traces, the scoring queue, concurrent judge calls and code scorers) split between the workers, so
the daemon's memory stays bounded by its configuration, not by its worker count. The judge's
requests per minute, the daemon's and each binding's, are split the same way (trace ids spread
the work evenly): each worker owns its part of every bucket, so no bucket is shared between
processes. Daemons sharing a PostgreSQL store share their buckets there instead (whole, not split).
"""

from __future__ import annotations

from tracescorer.config import Settings


def share(settings: Settings, count: int) -> Settings:
    """The settings of one of ``count`` workers (see the module docstring)."""

    def part(value: int) -> int:
        return -(-value // count)  # rounded up: 0 stays 0, a positive bound stays positive

    s = settings
    split_rates = s.store.backend == "duckdb"
    judge = {"max_concurrency": part(s.judge.max_concurrency)}
    scorers = s.scorers
    if split_rates:
        judge["requests_per_minute"] = part(s.judge.requests_per_minute)
        scorers = [
            b.model_copy(update={"limits": b.limits.model_copy(update={"requests_per_minute": part(rpm)})})
            if (rpm := b.limits.requests_per_minute) is not None
            else b
            for b in s.scorers
        ]
    return s.model_copy(
        update={
            "assembly": s.assembly.model_copy(
                update={"max_traces": part(s.assembly.max_traces), "max_spans": part(s.assembly.max_spans)}
            ),
            "triage": s.triage.model_copy(update={"max_traces": part(s.triage.max_traces)}),
            "scoring": s.scoring.model_copy(
                update={"max_queue": part(s.scoring.max_queue), "workers": part(s.scoring.workers)}
            ),
            "judge": s.judge.model_copy(update=judge),
            "scorers": scorers,
        }
    )
