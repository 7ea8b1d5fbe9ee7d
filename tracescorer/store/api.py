"""The store's contract with the rest of the daemon: errors, outcomes, and one narrow Protocol per
consumer. Stages import this module and nothing else of :mod:`tracescorer.store`.

The parts a daemon gets (:class:`~tracescorer.store.factory.Stores`) may live in different engines:
the **span log** (raw telemetry and the per-daemon assembly records) is always the daemon's own
DuckDB file (:mod:`tracescorer.store.duckdb`); the **results** (runs, scores, decisions, deliveries,
monitors, budgets) are in the same file, or shared by several daemons in PostgreSQL
(:mod:`tracescorer.store.postgres`), which then also coordinates them (:class:`Coordination`).

Every method is a coroutine that runs on the daemon's event loop and never blocks it (the engines
do their work in another process or on a connection pool). Writes return once they are durable;
errors are :class:`StoreError` subclasses. See docs/architecture.md for which stage uses which part.

The errors are defined in :mod:`tracescorer.store.errors` and the outcomes (the records methods
return) in :mod:`tracescorer.store.outcomes`; both are re-exported here, under ``__all__``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from typing import Any, Protocol

from tracescorer.model import AgentRun, Conversation, LogRecord, Span
from tracescorer.records.deliveries import Claim, DeliveryOutcome, DueScore
from tracescorer.records.heal import HealPolicy
from tracescorer.records.judge_batches import JudgeBatchRecord
from tracescorer.records.labels import EvaluationRecord, LabelRecord
from tracescorer.records.monitors import MonitorEvent, MonitorState, Rebuilt, WindowSpec
from tracescorer.records.scores import AssemblyRecord, DecisionRecord, ScoreRecord, VerdictRecord
from tracescorer.records.skipped import SkippedTrace
from tracescorer.store.errors import (
    REFUSED,
    DataError,
    DiskFull,
    QueueFull,
    ReadOnlyViolation,
    SchemaError,
    StoreClosed,
    StoreError,
    StoreLocked,
    StoreUnavailable,
    disk_full,
    write_narrowing,
)
from tracescorer.store.outcomes import (
    AppendOutcome,
    AssembledBefore,
    ConversationClaim,
    HealCandidate,
    PendingRecovery,
    QueryResult,
    ResultsPruned,
)
from tracescorer.store.reads import Read, ReadStore

# --- one protocol per consumer ----------------------------------------------------------------------


class Intake(Protocol):
    """Span rows in: the segment log's feed stores telemetry rows, each with the log offset of the
    request it came in (a row's ``log_offset``), committed before it goes on."""

    max_queue_items: int
    """Bound of :attr:`pending_items`: past it :meth:`append` raises :class:`QueueFull`."""

    @property
    def pending_items(self) -> int:
        """Telemetry items handed to :meth:`append` and not yet committed."""

    async def append(
        self,
        spans: Sequence[Span],
        logs: Sequence[LogRecord] = (),
        *,
        span_offsets: Sequence[int] | None = None,
        log_offsets: Sequence[int] | None = None,
        skipped: Sequence[SkippedTrace] = (),
        consumer: str = "",
    ) -> AppendOutcome:
        """Store spans and log records (with the log offsets of their requests, one per item) and
        the traces triage skipped; returns once they are committed, all in one transaction unless
        some cannot be stored. ``consumer`` names the feed (a worker's) that stores them: its
        :meth:`FeedState.rows_through` mark is committed with the rows (``""``: the single feed).
        Raises :class:`QueueFull` (intake bounded), :class:`StoreClosed` or :class:`StoreError`;
        items whose values cannot be stored are refused one by one in the outcome."""


class FeedState(Protocol):
    """Where each feed of the segment log stands, kept beside the span rows it writes. A feed is a
    consumer: ``""`` the single feed of a daemon without workers, a name per worker otherwise."""

    async def rows_through(self, consumer: str = "") -> int | None:
        """The largest log offset of the span, log or skipped-trace rows the consumer stored (None
        when it stored none): every request of its share up to it was stored whole, a batch at a
        time (exact: committed with the rows, kept when retention deletes them)."""

    async def feed_offset(self, consumer: str = "") -> int:
        """Where the consumer's feed resumes: every request before it was handled (0 at first)."""

    async def set_feed_offset(self, offset: int, consumer: str = "") -> None:
        """Remember where the consumer's feed resumes."""

    async def feed_consumers(self) -> dict[str, tuple[int, int | None]]:
        """The saved state of every consumer (``""`` included): name -> (:meth:`feed_offset`,
        :meth:`rows_through`)."""


class SpanLog(Protocol):
    """The assembly stage's bookkeeping: which traces were assembled, from which log records."""

    async def assembled_before(self, trace_ids: Sequence[str]) -> dict[str, AssembledBefore]:
        """Those of the given traces that have an assembly record, with what it says."""

    async def record_assembly(self, records: Sequence[AssemblyRecord], *, new_traces: Collection[str] = ()) -> None:
        """Remember that these traces were assembled (and why some gave no run). ``new_traces``:
        traces the caller believes were never assembled before, a hint that lets the store skip
        looking for their stored rows (a wrong hint costs time, never data)."""


class RunStore(Protocol):
    """Runs and conversations: written by assembly, read by scoring and backfills."""

    async def upsert_runs(
        self, runs: Sequence[AgentRun], *, replace_traces: Sequence[str] = (), new_traces: Collection[str] = ()
    ) -> None:
        """Insert or update runs by run id; for the traces in ``replace_traces`` (re-assembled),
        runs not in ``runs`` are deleted. ``new_traces``: as for :meth:`SpanLog.record_assembly`."""

    async def load_runs(self, run_ids: Sequence[str]) -> list[AgentRun]:
        """The stored runs of these ids (unknown ids left out)."""

    async def load_conversation(self, conversation_id: str) -> Conversation | None:
        """Every stored run of the conversation, by start time."""

    async def target_ids(self, scope: str, *, since: dt.datetime | None, until: dt.datetime | None) -> list[str]:
        """Run ids (``scope='run'``) or conversation ids started in the time range, oldest first."""


class ScoreStore(Protocol):
    """The scoring stage: score rows and decisions, the day's judge spend, restart recovery."""

    async def write_scores(self, scores: Sequence[ScoreRecord], decisions: Sequence[DecisionRecord]) -> None:
        """Upsert score rows and decisions by id (last one wins)."""

    async def spent_today_usd(self) -> float:
        """Judge spend recorded on scores updated since the start of the UTC day."""

    async def score_statuses(self, score_ids: Sequence[str]) -> dict[str, str]:
        """``{score id: status}`` of the stored score rows among ``score_ids`` (a backfill of
        errors or of missing scores asks which targets to re-score)."""

    async def spent_today_by_scorer(self, scorer_ids: Sequence[str]) -> dict[str, float]:
        """Judge spend of these scorers on scores updated since the start of the UTC day (the
        per-binding caps); scorers without spend are left out."""

    async def unscored_recent(
        self, run_scorer_ids: Sequence[str], *, window_s: float, conversation_scorer_ids: Sequence[str] = ()
    ) -> PendingRecovery:
        """Runs and conversations updated in the last ``window_s`` that some of these run-scope /
        conversation-scope bindings have not decided (a conversation: not since its last run)."""

    async def heal_candidates(
        self, scorer_ids: Sequence[str], policy: HealPolicy, *, now: float, limit: int
    ) -> list[HealCandidate]:
        """Error scores of these scorers whose error is ``transient``, re-scored fewer than
        ``policy.max_attempts`` times, first stored within ``max_age_s``, whose backoff has passed
        (the last failure, ``updated_at``, is :meth:`HealPolicy.backoff_s` of their
        ``heal_attempts`` old at ``now``, epoch seconds of the daemon's clock); the longest-failed
        first, at most ``limit``."""

    async def scores_of(self, score_ids: Sequence[str]) -> dict[str, tuple[str, float | None]]:
        """``{score id: (status, score)}`` of the stored score rows among ``score_ids`` (a gated
        binding reads its gate's score)."""

    async def find_verdict(self, input_hash: str, scorer_version: str, *, max_age_s: float) -> VerdictRecord | None:
        """The newest judge verdict stored for this request under this scorer version within the
        last ``max_age_s`` (committed ones: from any process or daemon, before a restart too)."""

    async def write_verdicts(self, verdicts: Sequence[VerdictRecord], *, max_age_s: float) -> None:
        """Keep judge verdicts for reuse (stamped now), and delete those older than ``max_age_s``."""

    async def open_judge_batches(self) -> list[JudgeBatchRecord]:
        """The provider batches of judge requests not closed (``intent`` or ``submitted``)."""

    async def put_judge_batch(self, batch: JudgeBatchRecord) -> None:
        """Insert or replace a provider batch's row by id; returns once it is durable."""


class LabelStore(Protocol):
    """Human labels: the ops API and the ``label`` command."""

    async def write_labels(self, labels: Sequence[LabelRecord]) -> int:
        """Insert labels, or replace the stored label of the same id (target, scorer, person) when
        the new one is at least as recent (``labelled_at``); returns the labels written (an older
        one than stored is left out)."""


class EvaluationStore(Protocol):
    """Other tools' ``gen_ai.evaluation.result`` events, received over OTLP."""

    async def write_evaluations(self, evaluations: Sequence[EvaluationRecord]) -> None:
        """Upsert external evaluations by id (last one wins)."""


class DeliveryStore(Protocol):
    """The export stage: per-sink delivery state (semantics: :mod:`tracescorer.store.duckdb.deliveries`)."""

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


class MonitorStore(Protocol):
    """The built-in monitors: their state, events, and windows rebuilt from stored scores."""

    async def monitor_states(self, monitor_ids: Sequence[str]) -> list[MonitorState]:
        """The stored state of these monitors (unknown ids left out)."""

    async def save_monitors(self, states: Sequence[MonitorState], events: Sequence[MonitorEvent]) -> None:
        """Upsert monitor states, append events."""

    async def prune_monitor_events(self, now: float) -> int:
        """Delete events past their retention; rows deleted."""

    async def rebuild_monitor_windows(self, specs: Sequence[WindowSpec], max_examples: int) -> Rebuilt:
        """Window buckets and examples of live scores, one bounded query."""


class Coordination(Protocol):
    """What several daemons sharing one result store (PostgreSQL mode) coordinate through it.

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

    async def conversation_stats(self) -> dict[str, int]:
        """Counts of conversations by coordination state, for metrics."""


class QueryStore(Protocol):
    """Users' SQL (``tracescorer query``, the ops API's query route): one read-only statement. The
    product's own reads are the typed calls of :class:`ReadStore` (:mod:`tracescorer.store.reads`:
    one method per declared query, on the store's own readers)."""

    async def query(self, sql: str, *, max_rows: int, timeout_s: float, params: Sequence[Any] = ()) -> QueryResult:
        """One read-only statement (refused otherwise) with ``?`` parameters, a row limit and a
        timeout."""


class Health(Protocol):
    """Readiness: whether the store takes writes, and why writes fail while they do."""

    @property
    def accepting(self) -> bool:
        """True while writes are taken."""

    @property
    def write_failure(self) -> str | None:
        """Why the last write failed, while writes are failing (None when the last one worked)."""


class Leadership(Protocol):
    """One daemon of several does a job (the monitors): held until released or the holder is gone."""

    async def try_acquire(self) -> bool:
        """Take the lead if nobody holds it; whether this daemon leads now."""

    async def held(self) -> bool:
        """Whether this daemon still leads (a lost connection loses the lead)."""

    async def release(self) -> None:
        """Give the lead up."""


__all__ = [
    "REFUSED",
    "AppendOutcome",
    "AssembledBefore",
    "ConversationClaim",
    "Coordination",
    "DataError",
    "DeliveryStore",
    "DiskFull",
    "EvaluationStore",
    "FeedState",
    "HealCandidate",
    "Health",
    "Intake",
    "LabelStore",
    "Leadership",
    "MonitorStore",
    "PendingRecovery",
    "QueryResult",
    "QueryStore",
    "QueueFull",
    "Read",
    "ReadOnlyViolation",
    "ReadStore",
    "ResultsPruned",
    "RunStore",
    "SchemaError",
    "ScoreStore",
    "SpanLog",
    "StoreClosed",
    "StoreError",
    "StoreLocked",
    "StoreUnavailable",
    "disk_full",
    "write_narrowing",
]
