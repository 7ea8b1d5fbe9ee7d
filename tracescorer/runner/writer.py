"""Score and decision rows to the store, many per transaction; workers never wait for a commit.

Rows are collected into the open batch; one writer task stores batches in order (a failed write
is retried, ahead of newer rows). :meth:`ScoreWriter.committed` gives a future that resolves once
every row added so far is stored, which is when a conversation claim may be released as done.
Listeners hear of score rows after their commit; those that also have ``on_decisions``
(:class:`DecisionListener`: coverage monitors) of the decision rows after theirs.

A write sent to the store is never sent again while its outcome is unknown: it runs in a task of
its own, which a flush cancelled (the writer's stop, a deadline) leaves running, and the next flush
waits for it first. A stop that cancelled a write and sent its rows again wrote them twice (the
store commits what it was sent), moving ``updated_at`` and exporting the scores again.

A row the store refuses as data (a judge's reason with a lone surrogate, a user step's integer past
64 bits) could never be stored, and retrying it would hold back every row after it: the refused
rows are found by halves and stored as error rows that say why (bare ones of ids and plain text
when even those are refused), counted and logged; the others are stored as they are. A target is
not left without a row, so a conversation claim finished once its rows are stored has one.

Each committed live score row of a target with an end time is observed in
``tracescorer_time_to_score_seconds``: from the target's end (a run's end, a conversation's last
turn) to its commit, read on the writer's clock, so in the process that wrote it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol, runtime_checkable

from tracescorer.clock import SYSTEM_CLOCK, Clock
from tracescorer.metrics import Metrics
from tracescorer.records.scores import DecisionRecord, ScoreRecord
from tracescorer.store.api import REFUSED, ScoreStore, write_narrowing

log = logging.getLogger(__name__)

RETRY_S = 1.0
_Unit = tuple[ScoreRecord | None, list[DecisionRecord]]  # a score row (or none) with its decisions
_Rows = tuple[list[ScoreRecord], list[DecisionRecord]]
#: metadata of a refused score row kept in its error row (from the trace: storable)
_KEPT_METADATA = ("run_ids", "convention", "model", "service_name")


class ScoreListener(Protocol):
    """Told about score rows after they were committed (on the event loop; must not block or raise)."""

    def on_scores(self, scores: Sequence[ScoreRecord]) -> None: ...


@runtime_checkable
class DecisionListener(ScoreListener, Protocol):
    """A listener also told about decision rows after they were committed (same rules)."""

    def on_decisions(self, decisions: Sequence[DecisionRecord]) -> None: ...


class ScoreWriter:
    """Batches rows for :meth:`ScoreStore.write_scores` (see the module docstring)."""

    def __init__(
        self,
        store: ScoreStore,
        listeners: Sequence[ScoreListener] = (),
        *,
        metrics: Metrics | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._store = store
        self._metrics = metrics  # score rows refused, time to score
        self._clock = clock
        self.listeners = list(listeners)
        self._scores: list[ScoreRecord] = []
        self._decisions: list[DecisionRecord] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._writing = 0  # rows in the batch being written
        self._writing_cost = 0.0
        self._sending: asyncio.Task[None] | None = None  # the write in flight
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._failing: str | None = None  # why writes fail, while they do (logged once per streak)

    @property
    def waiting(self) -> int:
        """Rows not stored yet."""
        return len(self._scores) + len(self._decisions) + self._writing

    @property
    def uncommitted_cost_usd(self) -> float:
        """Judge spend of score rows not stored yet (the shared budget counts it once stored)."""
        return self._writing_cost + sum(s.judge_cost_usd or 0.0 for s in self._scores)

    def add(self, decision: DecisionRecord, score: ScoreRecord | None = None) -> None:
        if score is not None:
            self._scores.append(score)
        self._decisions.append(decision)
        self._dirty.set()

    def committed(self) -> asyncio.Future[None]:
        """A future resolved once every row added before this call is stored."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self._scores and not self._decisions and not self._writing:
            future.set_result(None)
            return future
        self._waiters.append(future)
        self._dirty.set()
        return future

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="score-writer")

    async def _run(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self.flush()
            except Exception as exc:  # rows stay pending and are retried with the next batch
                if _why(exc) != self._failing:  # a full disk fails every try: said once
                    log.exception(
                        "storing scores failed; retrying every %.0fs (not logged again until it works)", RETRY_S
                    )
                self._failing = _why(exc)
                await asyncio.sleep(RETRY_S)
                self._dirty.set()

    async def flush(self) -> None:
        """Store every pending row now and wait for the commit (raises when the write fails; the
        rows stay pending). Cancelled, the write goes on (see the module docstring)."""
        async with self._lock:
            if self._sending is not None:  # left running by a cancelled flush: its rows are sent
                await asyncio.wait([self._sending])
            scores, self._scores = self._scores, []
            decisions, self._decisions = self._decisions, []
            waiters, self._waiters = self._waiters, []
            if not scores and not decisions:
                _resolve(waiters)
                return
            self._writing = len(scores) + len(decisions)
            self._writing_cost = sum(s.judge_cost_usd or 0.0 for s in scores)
            self._sending = asyncio.create_task(self._send(scores, decisions, waiters), name="score-write")
            await asyncio.shield(self._sending)

    async def _send(
        self, scores: list[ScoreRecord], decisions: list[DecisionRecord], waiters: list[asyncio.Future[None]]
    ) -> None:
        """One write and its outcome: the waiters resolved and listeners told, or the rows pending again."""
        try:
            stored, decided = await self._write(scores, decisions)
        except BaseException:
            self._scores[:0], self._decisions[:0], self._waiters[:0] = scores, decisions, waiters
            raise
        finally:
            self._writing, self._writing_cost, self._sending = 0, 0.0, None
        if self._failing is not None:
            log.info("storing scores works again (it failed: %s)", self._failing)
            self._failing = None
        _resolve(waiters)
        if stored and self._metrics is not None:
            _time_to_score(self._metrics, self._clock.time(), stored)
        for listener in self.listeners:
            try:
                if stored:
                    listener.on_scores(stored)
                if decided and isinstance(listener, DecisionListener):
                    listener.on_decisions(decided)
            except Exception:  # a listener must never fail score storage
                log.exception("score listener %r failed", listener)

    async def _write(self, scores: list[ScoreRecord], decisions: list[DecisionRecord]) -> _Rows:
        """Store the rows (one write when the store takes them all); the rows stored."""
        instead: list[_Unit] = []  # the error rows stored for refused ones

        async def write(units: list[_Unit], retry: bool) -> None:
            await self._store.write_scores(*_rows(units))

        async def refused(unit: _Unit, exc: Exception) -> None:
            instead.append(await self._write_refused(unit, exc))

        return _rows([*await write_narrowing(_units(scores, decisions), write, refused), *instead])

    async def _write_refused(self, unit: _Unit, exc: Exception) -> _Unit:
        score, decisions = unit
        what = (
            f"{score.scorer_id} on {score.run_id or score.conversation_id}"
            if score
            else ", ".join(f"{d.scorer_id} on {d.target_id}" for d in decisions)
        )
        error = f"the store refused this score row: {type(exc).__name__}: {exc}"
        if self._metrics is not None:
            self._metrics.score_rows_refused.inc()
        rows = (
            [_error_row(score, error)] if score else [],
            [replace(d, decision="failed" if d.decision == "scored" else d.decision, detail=error) for d in decisions],
        )
        try:
            await self._store.write_scores(*rows)
        except REFUSED as again:
            # what the error row kept from the scorer (its name, the judge's model) or the error's
            # text may be what was refused: the bare row has the target's ids and plain ASCII
            plain = _plain(f"the store refused this score row ({exc}) and its error row ({again})")
            rows = ([_bare(rows[0][0], plain)] if score else [], [replace(d, detail=plain) for d in rows[1]])
            try:
                await self._store.write_scores(*rows)
            except REFUSED as bare:  # its ids: nothing about this target can be stored, ever
                log.error("the store refused every row about %s (%s; %s; %s): not stored", what, exc, again, bare)
                return None, []
        log.warning("the store refused the score row of %s (%s): stored as an error row instead", what, exc)
        return (rows[0][0] if rows[0] else None), rows[1]

    async def close(self, timeout_s: float) -> bool:
        """Stop the writer task, store what is pending until the deadline; False when rows were left
        (a write the store did not answer by then is not sent again: the store commits what it was
        sent, and the next start's recovery scores the targets it did not)."""
        deadline = time.monotonic() + timeout_s
        if self._task is not None:
            self._task.cancel()  # a write it sent goes on
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        while self.waiting and (remaining := deadline - time.monotonic()) > 0:
            try:
                await asyncio.wait_for(self.flush(), remaining)
            except Exception as exc:  # noqa: BLE001 - try again until the deadline
                if time.monotonic() >= deadline:
                    break  # the deadline, not a failure: what is still in flight is said below
                log.warning("storing the last scores failed: %s", _why(exc))
                await asyncio.sleep(min(RETRY_S, max(0.0, deadline - time.monotonic())))
        sent, left = self._writing, len(self._scores) + len(self._decisions)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.cancel()
        self._waiters = []
        if sent:
            log.warning(
                "%d score/decision row(s) sent to the store were not answered before the deadline; not sent "
                "again (the store commits what it was sent; targets it did not are scored after the next start)",
                sent,
            )
        if left:
            log.error(
                "%d score/decision row(s) not stored before the deadline; their targets are scored again "
                "after the next start",
                left,
            )
        return not sent and not left


def _why(exc: BaseException) -> str:
    """``exc`` for a log line: its type, and its message when it has one (a timeout has none)."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _time_to_score(m: Metrics, now: float, stored: Sequence[ScoreRecord]) -> None:
    """Observe the live rows committed at ``now`` (epoch seconds); a target's end ahead of it (a
    client's clock skew) counts as 0."""
    now_us = now * 1e6
    for row in stored:
        if row.source == "live" and row.target_ended_at is not None:
            m.child(m.time_to_score, row.scorer_id).observe(max(0.0, now_us - row.target_ended_at) / 1e6)


def _resolve(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)


def _units(scores: Sequence[ScoreRecord], decisions: Sequence[DecisionRecord]) -> list[_Unit]:
    """Each score row with its decision rows, then the decisions without a score row."""
    by_score: dict[str, list[DecisionRecord]] = {s.id: [] for s in scores}
    alone: list[DecisionRecord] = []
    for d in decisions:
        (by_score.get(d.score_id, alone) if d.score_id is not None else alone).append(d)
    return [(s, by_score[s.id]) for s in scores] + [(None, [d]) for d in alone]


def _rows(units: Sequence[_Unit]) -> tuple[list[ScoreRecord], list[DecisionRecord]]:
    return [s for s, _ in units if s is not None], [d for _, ds in units for d in ds]


def _error_row(score: ScoreRecord, error: str) -> ScoreRecord:
    """``score`` as an error row that says why it was refused, without what the scorer returned
    (any of which may be what the store refused); the judge's cost is kept for the budget."""
    meta = {k: v for k, v in (score.metadata or {}).items() if k in _KEPT_METADATA}
    return replace(
        score,
        score=None,
        reason=None,
        status="error",
        error=error,
        error_type="StoreRefused",
        label=None,
        preprocess_step_result=None,
        analyze_step_result=None,
        preprocess_prompt=None,
        analyze_prompt=None,
        generate_score_prompt=None,
        generate_reason_prompt=None,
        judge_input_tokens=None,
        judge_output_tokens=None,
        judge_attempts=None,
        metadata=meta,
    )


def _bare(row: ScoreRecord, error: str) -> ScoreRecord:
    """An error row of ids, numbers and ``error`` only: for when even :func:`_error_row` was refused."""
    return replace(row, scorer_name=row.scorer_id, entity_id=None, judge_model=None, metadata=None, error=error)


def _plain(text: str, limit: int = 2000) -> str:
    """``text`` as printable ASCII (escapes for the rest: lone surrogates, NUL), at most ``limit`` chars."""
    return text.encode("ascii", "backslashreplace").decode("ascii").replace("\x00", "\\x00")[:limit]
