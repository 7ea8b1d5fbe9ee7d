"""What the export stage and the store exchange about deliveries: due score versions, claims, outcomes.

The semantics (one row per score and sink, versions, leases) are the store's:
:mod:`tracescorer.store.duckdb.deliveries` and :mod:`tracescorer.store.postgres.deliveries`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class DueScore:
    """A score version due for one sink, with what the sinks need to place it.

    ``scored_end_unix_nano`` and ``service_name`` are the scored run's (its agent span's end and
    its resource's ``service.name``); ``first_trace_id``/``first_span_id`` the conversation's
    first run (conversation scores only); ``attempts`` and ``delivered_version`` come from this
    sink's delivery row.
    """

    id: str
    scorer_id: str
    scorer_name: str | None
    run_id: str | None
    trace_id: str | None
    span_id: str | None
    conversation_id: str | None
    entity_type: str | None
    score: float | None
    reason: str | None
    status: str
    error: str | None
    error_type: str | None
    label: str | None
    threshold: float | None
    judge_model: str | None
    judge_cost_usd: float | None
    duration_ms: float | None
    version: int
    scorer_version: str | None = None
    scored_end_unix_nano: int | None = None
    service_name: str | None = None
    first_trace_id: str | None = None
    first_span_id: str | None = None
    attempts: int = 0
    delivered_version: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """One score version to claim for a sink."""

    score_id: str
    version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryOutcome:
    """What one attempt at one score version came to.

    ``status``: ``delivered``, ``pending`` (retry after ``retry_in_s``) or ``failed`` (given up);
    ``attempts`` counts this attempt.
    """

    score_id: str
    version: int
    status: str
    attempts: int
    error: str | None = None
    retry_in_s: float = 0.0


def conversations_of(due: Sequence[DueScore]) -> list[str]:
    """The conversations whose first run conversation scores need (sorted)."""
    return sorted({d.conversation_id for d in due if d.entity_type == "conversation" and d.conversation_id})


def with_first_runs(due: Sequence[DueScore], first: dict[str, tuple[str, str]]) -> list[DueScore]:
    """``due`` with each conversation score's first run (trace id, span id) filled in."""
    out = []
    for d in due:
        if d.entity_type == "conversation" and d.conversation_id in first:
            trace_id, span_id = first[d.conversation_id]
            d = dataclasses.replace(d, first_trace_id=trace_id, first_span_id=span_id)
        out.append(d)
    return out
