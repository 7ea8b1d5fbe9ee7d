"""What the store's methods return: frozen records of query rows, append outcomes, stored traces,
recovery and heal candidates, retention passes and conversation claims.

Re-exported by :mod:`tracescorer.store.api`, which stages import instead of this module.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from tracescorer.model import AgentRun


@dataclass(frozen=True, slots=True)
class QueryResult:
    """Rows of a read-only query, at most ``max_rows`` (``truncated`` when there were more)."""

    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool = False

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=False)) for row in self.rows]


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    """What became of one telemetry append: items stored, items refused for their data, and the
    ``received_at`` the stored items got (epoch seconds, first and last: a read bounded by them
    finds the items without scanning the whole span log)."""

    stored: int
    rejected: int = 0
    message: str = ""
    received_from: float = 0.0
    received_to: float = 0.0


@dataclass(frozen=True, slots=True)
class AssembledBefore:
    """A trace's assembly record: the segment-log records its items came in (empty when an older
    version assembled it from span rows) and how many spans and log records the assembly held."""

    offsets: tuple[int, ...]
    span_count: int
    log_count: int


@dataclass(frozen=True, slots=True)
class PendingRecovery:
    """Recent targets that lack a decision of some current binding (the daemon stopped between
    assembly and scoring); ``decided`` names, per (target kind, target id), the bindings that did
    decide (they are not run again)."""

    runs: list[AgentRun]
    conversation_ids: list[str]
    decided: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HealCandidate:
    """An error score due an automatic re-score (:mod:`tracescorer.runner.heal`): its target
    (``run`` id or ``conversation`` id) and the re-scores it went through so far."""

    score_id: str
    scorer_id: str
    target_type: str  # run | conversation
    target_id: str
    heal_attempts: int


@dataclass(frozen=True, slots=True)
class ResultsPruned:
    """What a results retention pass did: rows deleted per table; for a store whose key indexes
    live in memory (DuckDB), the keys it held before (``keys``), how many it may hold
    (``max_keys``), the index memory in use and, when the budget deleted results younger than the
    retention age, the time they were deleted up to (``budget_cutoff``) and the write
    transactions the deletes took (``transactions``)."""

    deleted: dict[str, int] = field(default_factory=dict)
    keys: int | None = None
    max_keys: int | None = None
    index_bytes: int | None = None
    budget_cutoff: dt.datetime | None = None
    transactions: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationClaim:
    """A due conversation claimed for scoring: ``seq`` is the activity the scoring covers;
    ``takeover`` when the claim was taken from a daemon whose lease had run out."""

    conversation_id: str
    seq: int
    takeover: bool = False
