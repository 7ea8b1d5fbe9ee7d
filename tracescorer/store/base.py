"""The store plug-in point: what the pipeline asks of its database, in domain terms.

Two halves, because they can live in different engines: the **span log** (raw telemetry and the
per-daemon assembly records that say which traces were turned into runs) and the **results**
(runs, scores, scoring decisions, budget counters). The embedded default keeps both in one DuckDB
file (:class:`~tracescorer.store.duckdb.store.DuckDBStore`); several daemons keep their own span log and
share the results in PostgreSQL.

Every method is a coroutine that runs on the daemon's event loop and never blocks it (the
engines do their work in another process or on a connection pool). Writes return once they are
durable; errors are :class:`StoreError` subclasses.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tracescorer.model import AgentRun, Conversation, LogRecord, Span
from tracescorer.records.deliveries import Claim, DeliveryOutcome, DueScore
from tracescorer.records.scores import AssemblyRecord, DecisionRecord, ScoreRecord

if TYPE_CHECKING:
    from tracescorer.records.monitors import MonitorEvent, MonitorState, Rebuilt, WindowSpec

T = TypeVar("T")


class StoreError(RuntimeError):
    """A store operation failed (retryable unless a subclass says otherwise)."""


class QueueFull(StoreError):
    """The write queue is full; retry later."""


class StoreClosed(StoreError):
    """The store no longer accepts writes (shutting down)."""


class ReadOnlyViolation(StoreError):
    """A statement other than a plain read was given to a read-only query."""


class DataError(StoreError):
    """The data cannot be stored (a value out of range, a bad type): the client's fault, never
    retryable."""


#: What a store raises for data it cannot hold: its DataError, or what the row encoders raise
#: (orjson's TypeError for lone surrogates and integers past 64 bits, Arrow's OverflowError).
#: Retrying such a write can never succeed.
REFUSED: tuple[type[Exception], ...] = (DataError, TypeError, ValueError, OverflowError)


async def write_narrowing(
    items: list[T],
    write: Callable[[list[T], bool], Awaitable[None]],
    refused: Callable[[T, Exception], Awaitable[None]],
) -> list[T]:
    """``write(items, False)``; when the store refuses them as data (:data:`REFUSED`), write them
    by halves (``write(part, True)``: a retry) down to single items and hand each one still refused
    to ``refused``, so one bad item cannot hold back the others for good. Returns the items written
    as they were; other errors propagate."""

    async def attempt(part: list[T], retry: bool) -> list[T]:
        try:
            await write(part, retry)
            return part
        except REFUSED as exc:
            if len(part) == 1:
                await refused(part[0], exc)
                return []
            half = len(part) // 2
            return [*await attempt(part[:half], True), *await attempt(part[half:], True)]

    return await attempt(items, False)


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
class TraceData:
    """Every stored span and log record of one trace."""

    spans: tuple[Span, ...]
    logs: tuple[LogRecord, ...]


@dataclass(frozen=True, slots=True)
class PendingRecovery:
    """Recent targets that lack a decision of some current binding (the daemon stopped between
    assembly and scoring); ``decided`` names, per (target kind, target id), the bindings that did
    decide (they are not run again)."""

    runs: list[AgentRun]
    conversation_ids: list[str]
    decided: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)


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


class SpanLog(Protocol):
    """Raw telemetry, acknowledged only once committed, and the assembly bookkeeping."""

    max_queue_items: int
    """Bound of :attr:`pending_items`: past it :meth:`append` raises :class:`QueueFull`."""

    @property
    def pending_items(self) -> int:
        """Telemetry items handed to :meth:`append` and not yet committed."""

    async def append(self, spans: Sequence[Span], logs: Sequence[LogRecord] = ()) -> AppendOutcome:
        """Store spans and log records; returns once they are committed. Raises
        :class:`QueueFull` (intake bounded), :class:`StoreClosed` or :class:`StoreError`; items
        whose values cannot be stored are refused one by one in the outcome."""

    async def load_traces(
        self, trace_ids: Sequence[str], *, received: tuple[float, float] | None = None
    ) -> dict[str, TraceData]:
        """Every stored span/log record of the given traces; ``received`` (epoch seconds, from
        :class:`AppendOutcome`) bounds the read to the items received in that range."""

    async def pending_traces(self, *, limit: int) -> list[tuple[str, float, float, bool]]:
        """Traces in the span log that were never assembled, or received items since, oldest
        first: (trace id, when the first and the last such item were received (epoch s),
        assembled before)."""

    async def assembled_before(self, trace_ids: Sequence[str]) -> set[str]:
        """Those of the given traces that have an assembly record."""

    async def set_assembled_through(self, when: dt.datetime) -> None:
        """Every trace with items received before ``when`` was handed to assembly: recovery
        looks no further back (a margin aside)."""

    async def record_assembly(self, records: Sequence[AssemblyRecord], *, new_traces: Collection[str] = ()) -> None:
        """Remember that these traces were assembled (and why some gave no run). ``new_traces``:
        traces the caller believes were never assembled before, a hint that lets the store skip
        looking for their stored rows (a wrong hint costs time, never data)."""

    async def prune_span_log(self, older_than: dt.datetime) -> dict[str, int]:
        """Delete raw telemetry and assembly records received before ``older_than``; rows deleted
        per table."""


class ResultStore(Protocol):
    """Runs, conversations, scores, decisions: the history people query."""

    async def upsert_runs(
        self, runs: Sequence[AgentRun], *, replace_traces: Sequence[str] = (), new_traces: Collection[str] = ()
    ) -> None:
        """Insert or update runs by run id; for the traces in ``replace_traces`` (re-assembled),
        runs not in ``runs`` are deleted. ``new_traces``: as for :meth:`SpanLog.record_assembly`."""

    async def load_runs(self, run_ids: Sequence[str]) -> list[AgentRun]: ...

    async def load_conversation(self, conversation_id: str) -> Conversation | None:
        """Every stored run of the conversation, by start time."""

    async def target_ids(self, scope: str, *, since: dt.datetime | None, until: dt.datetime | None) -> list[str]:
        """Run ids (``scope='run'``) or conversation ids started in the time range, oldest first."""

    async def write_scores(self, scores: Sequence[ScoreRecord], decisions: Sequence[DecisionRecord]) -> None:
        """Upsert score rows and decisions by id (last one wins)."""

    async def spent_today_usd(self) -> float:
        """Judge spend recorded on scores updated since the start of the UTC day."""

    async def prune_results(self, older_than: dt.datetime | None) -> ResultsPruned:
        """Delete runs, scores, decisions and their delivery rows last written before
        ``older_than`` (None: none for their age). A store whose key indexes are held in memory
        also deletes the oldest results, and assembly records, past its index budget."""

    async def unscored_recent(
        self, run_scorer_ids: Sequence[str], *, window_s: float, conversation_scorer_ids: Sequence[str] = ()
    ) -> PendingRecovery:
        """Runs and conversations updated in the last ``window_s`` that some of these run-scope /
        conversation-scope bindings have not decided (a conversation: not since its last run)."""

    # export deliveries, per sink (see tracescorer.store.duckdb.deliveries for the semantics)

    async def due_deliveries(self, sink: str, owner: str, limit: int, ignore_backoff: bool = False) -> list[DueScore]:
        """The oldest ``limit`` score versions ``sink`` has not delivered or given up on, that no
        other owner holds a live claim on."""

    async def claim_deliveries(self, sink: str, owner: str, lease_s: float, claims: Sequence[Claim]) -> dict[str, int]:
        """Claim score versions for ``owner``; ``{score_id: attempts so far}`` of those claimed."""

    async def record_deliveries(
        self, sink: str, owner: str, outcomes: Sequence[DeliveryOutcome], all_sinks: Sequence[str]
    ) -> int:
        """Store attempt outcomes, release the claims; rows updated."""

    async def next_delivery_due_in(self, sink: str) -> float | None:
        """Seconds until the sink's earliest pending retry (0 if overdue), None if none waits."""

    async def delivery_states(self, sink: str | None = None) -> list[dict[str, Any]]:
        """Delivery rows as dicts, for commands and tests."""

    # built-in monitors (see tracescorer.store.duckdb.monitors)

    async def monitor_states(self, monitor_ids: Sequence[str]) -> list[MonitorState]: ...

    async def save_monitors(self, states: Sequence[MonitorState], events: Sequence[MonitorEvent]) -> None:
        """Upsert monitor states, append events."""

    async def prune_monitor_events(self, now: float) -> int: ...

    async def rebuild_monitor_windows(self, specs: Sequence[WindowSpec], max_examples: int) -> Rebuilt:
        """Window buckets and examples of live scores, one bounded query."""

    async def query(self, sql: str, *, max_rows: int, timeout_s: float, params: Sequence[Any] = ()) -> QueryResult:
        """One read-only statement (refused otherwise) with ``?`` parameters, a row limit and a
        timeout."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationClaim:
    """A due conversation claimed for scoring: ``seq`` is the activity the scoring covers;
    ``takeover`` when the claim was taken from a daemon whose lease had run out."""

    conversation_id: str
    seq: int
    takeover: bool = False


class SharedCoordination(Protocol):
    """What several daemons sharing one result store coordinate through it (the PostgreSQL store).

    Conversations become due when idle across all daemons and are claimed with leases; the judge's
    requests-per-minute bucket is one shared bucket.
    """

    async def claim_conversations(
        self, *, idle_s: float, lease_s: float, limit: int, max_age_s: float
    ) -> list[ConversationClaim]:
        """Claim up to ``limit`` conversations idle for ``idle_s`` (activity within ``max_age_s``)
        that nobody holds a live lease on, for ``lease_s``."""

    async def renew_conversations(self, conversation_ids: Sequence[str], lease_s: float) -> list[str]:
        """Extend this daemon's leases; the ids still held."""

    async def finish_conversations(self, done: Sequence[tuple[str, int]], release: Sequence[str] = ()) -> int:
        """Record finished scorings ``(conversation id, seq)`` and release those claims; release
        ``release`` unscored. How many finished scorings still held their claim."""

    async def take_judge_tokens(self, bucket: str, tokens: float, capacity: float, per_s: float) -> float:
        """Take tokens from the shared bucket: 0 when taken, else seconds to wait (nothing taken)."""

    async def conversation_stats(self) -> dict[str, int]: ...


class Store(SpanLog, ResultStore, Protocol):
    """Both halves, with a lifecycle."""

    async def open(self) -> None:
        """Open (creating and migrating as needed); raises :class:`StoreError` naming the problem."""

    async def close(self, timeout_s: float) -> bool:
        """Stop intake, commit what was queued until the deadline, close. False when queued work
        could not be committed in time."""

    @property
    def accepting(self) -> bool:
        """True while writes are taken."""

    @property
    def write_failure(self) -> str | None:
        """Why the last write failed, while writes are failing (None when the last one worked)."""


__all__ = [
    "AppendOutcome",
    "ConversationClaim",
    "DataError",
    "PendingRecovery",
    "QueryResult",
    "QueueFull",
    "ReadOnlyViolation",
    "ResultStore",
    "ResultsPruned",
    "SharedCoordination",
    "SpanLog",
    "Store",
    "StoreClosed",
    "StoreError",
    "TraceData",
]
