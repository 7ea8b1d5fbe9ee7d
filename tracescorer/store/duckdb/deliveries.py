"""Per-sink delivery state of exported scores: the ``score_deliveries`` table and its SQL.

One row per (score, sink). A score *version* is ``epoch_us(scores.updated_at)``: a re-score is a
new version and is delivered again. A row's ``status`` is about ``score_version`` only:
``pending`` (not delivered yet; ``attempts`` so far, retried from ``next_attempt_at``),
``delivered`` or ``failed`` (the backend rejected it for good; ``last_error`` says why). A score
whose current version has no ``delivered``/``failed`` row for a sink is due for that sink.

Several daemons sharing one database claim work with a lease (``claimed_by``,
``claimed_until``): :func:`claim` takes only rows nobody else holds, :func:`record` releases them.
Every function is ``op(con, *args)`` on a DuckDB connection with plain-data arguments and
results (the DuckDB store runs them in its store process); :func:`read_due`,
:func:`next_due_in` and :func:`states` read, the others write inside the writer's transaction.
The table is created by the schema migrations (version 2; version 5 indexes ``score_id``).

Nothing here reads a whole table per export pass: scores are appended in ``updated_at`` order,
so :func:`read_due` pages forward from a *settled mark* (every version before it is delivered or
failed for the sink; the caller keeps it between calls) and looks delivery rows and runs up by
key, through their indexes. A full pass runs once, to find the first mark.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from tracescorer.store.duckdb.upsert import chunks, key_in

__all__ = [
    "Claim",
    "DeliveryOutcome",
    "DueScore",
    "claim",
    "next_due_in",
    "read_due",
    "record",
    "states",
]

from tracescorer.records.deliveries import (
    DELIVERED,
    PENDING,
    Claim,
    DeliveryOutcome,
    DueScore,
    conversations_of,
    with_first_runs,
)
from tracescorer.store.duckdb.jobs import Jobs

_SCORE_FIELDS = [
    "id", "scorer_id", "scorer_name", "run_id", "trace_id", "span_id", "conversation_id", "entity_type", "score",
    "reason", "status", "error", "error_type", "label", "threshold", "judge_model", "judge_cost_usd", "duration_ms",
    "scorer_version",
]  # fmt: skip

#: Scores looked at per page when paging forward for due ones.
PAGE = 2000

_MARK_SQL = """
SELECT min(epoch_us(s.updated_at)) FILTER (WHERE d.score_id IS NULL OR d.score_version <> epoch_us(s.updated_at)
                                           OR d.status = 'pending'),
       max(epoch_us(s.updated_at))
FROM scores s LEFT JOIN score_deliveries d ON d.score_id = s.id AND d.sink = ?
WHERE s.updated_at IS NOT NULL
"""

_PAGE_SQL = f"""
SELECT {", ".join(_SCORE_FIELDS)}, epoch_us(updated_at) AS version FROM scores
WHERE updated_at >= to_timestamp(0) + to_microseconds(CAST($mark AS BIGINT))
  AND (epoch_us(updated_at) > $after OR (epoch_us(updated_at) = $after AND id > $after_id))
ORDER BY updated_at, id
LIMIT $page
"""

_FIRST_RUNS_SQL = """
SELECT conversation_id, arg_min(trace_id, started_at_unix_nano), arg_min(span_id, started_at_unix_nano)
FROM runs WHERE list_contains(?::VARCHAR[], conversation_id) GROUP BY conversation_id
"""


def settled_mark(con: Any, sink: str) -> int | None:
    """The version before which every score version is settled (delivered or failed) for
    ``sink``: the first unsettled one, else the newest; None while there are no scores. Reads
    every score once: callers keep the mark :func:`read_due` returns instead of asking again."""
    row = con.execute(_MARK_SQL, [sink]).fetchall()
    if not row or row[0][1] is None:
        return None
    return int(row[0][0] if row[0][0] is not None else row[0][1])


def read_due(
    con: Any, sink: str, owner: str, limit: int, ignore_backoff: bool = False, mark: int | None = None
) -> tuple[list[DueScore], int | None]:
    """The oldest ``limit`` score versions ``sink`` has not delivered or given up on, and the
    settled mark to pass next time (``mark``: the one from the last call, None the first time).

    Rows waiting for their retry time are left out unless ``ignore_backoff``; rows another
    owner holds a live claim on are always left out (both stay unsettled).
    """
    if mark is None:
        mark = settled_mark(con, sink)
        if mark is None:
            return [], None
    now = int(con.execute("SELECT epoch_us(now())").fetchall()[0][0])
    n = len(_SCORE_FIELDS)
    due: list[DueScore] = []
    first_unsettled: int | None = None
    after, after_id = mark - 1, ""
    while len(due) < limit:
        page = con.execute(_PAGE_SQL, {"mark": mark, "after": after, "after_id": after_id, "page": PAGE}).fetchall()
        if not page:
            break
        states = _delivery_rows(con, sink, [r[0] for r in page])
        for row in page:
            version, d = row[n], states.get(row[0], _NO_ROW)
            current = d[0] == version
            if current and d[1] != PENDING:
                continue  # settled
            if first_unsettled is None:
                first_unsettled = version
            if current and not ignore_backoff and d[3] is not None and d[3] > now:
                continue  # waiting for its retry
            if d[4] is not None and d[4] > now and d[5] != owner:
                continue  # another daemon holds it
            due.append(
                DueScore(
                    **dict(zip(_SCORE_FIELDS, row[:n], strict=False)),
                    version=version,
                    attempts=d[2] if current else 0,
                    delivered_version=d[6],
                )
            )
            if len(due) >= limit:
                break
        after, after_id = page[-1][n], page[-1][0]
        if len(page) < PAGE:
            break
    next_mark = first_unsettled if first_unsettled is not None else max(mark, after)
    runs = _run_rows(con, [d.run_id for d in due if d.run_id is not None])  # for the due rows only
    due = [
        dataclasses.replace(d, scored_end_unix_nano=runs[d.run_id][0], service_name=runs[d.run_id][1])
        if d.run_id in runs
        else d
        for d in due
    ]
    conversations = conversations_of(due)
    if conversations:
        first = {c: (t, s) for c, t, s in con.execute(_FIRST_RUNS_SQL, [conversations]).fetchall()}
        due = with_first_runs(due, first)
    return due, next_mark


#: No delivery row yet (for :func:`read_due`): no version, status, claim or delivered version.
_NO_ROW: tuple[Any, ...] = (None, None, 0, None, None, None, None)


def _delivery_rows(con: Any, sink: str, score_ids: list[str]) -> dict[str, tuple[Any, ...]]:
    """{score id: (version, status, attempts, next attempt us, claimed until us, claimed by,
    delivered version)} of ``sink``'s rows for these scores, through the score_id index."""
    out: dict[str, tuple[Any, ...]] = {}
    for part in chunks(score_ids):
        for r in con.execute(
            "SELECT score_id, score_version, status, attempts, epoch_us(next_attempt_at), epoch_us(claimed_until), "
            f"claimed_by, delivered_version FROM score_deliveries WHERE {key_in('score_id', len(part))} AND sink = ?",
            [*part, sink],
        ).fetchall():
            out[r[0]] = tuple(r[1:])
    return out


def _run_rows(con: Any, run_ids: list[str]) -> dict[str, tuple[Any, Any]]:
    out: dict[str, tuple[Any, Any]] = {}
    for part in chunks(sorted(set(run_ids))):
        for run_id, ended, service in con.execute(
            f"SELECT run_id, ended_at_unix_nano, service_name FROM runs WHERE {key_in('run_id', len(part))}", part
        ).fetchall():
            out[run_id] = (ended, service)
    return out


def claim(con: Any, sink: str, owner: str, lease_s: float, claims: Sequence[Claim]) -> dict[str, int]:
    """Claim these score versions for ``owner`` (until ``lease_s`` from now) unless another owner
    holds a live claim; returns ``{score_id: attempts so far for that version}`` of those claimed.
    A row about an older version starts over at zero attempts."""
    if not claims:
        return {}
    values = ", ".join(["(?, ?, ?, 'pending', 0, ?, now() + to_microseconds(CAST(? AS BIGINT)))"] * len(claims))
    params: list[Any] = []
    for c in claims:
        params += [c.score_id, sink, c.version, owner, int(lease_s * 1e6)]
    rows = con.execute(
        "INSERT INTO score_deliveries AS d (score_id, sink, score_version, status, attempts, claimed_by, claimed_until) "
        f"VALUES {values} ON CONFLICT (score_id, sink) DO UPDATE SET "
        "attempts = CASE WHEN d.score_version = excluded.score_version THEN d.attempts ELSE 0 END, "
        "status = CASE WHEN d.score_version = excluded.score_version THEN d.status ELSE 'pending' END, "
        "score_version = excluded.score_version, claimed_by = excluded.claimed_by, "
        "claimed_until = excluded.claimed_until "
        "WHERE d.claimed_until IS NULL OR d.claimed_until <= now() OR d.claimed_by = excluded.claimed_by "
        "RETURNING score_id, attempts",
        params,
    ).fetchall()
    return {score_id: int(attempts) for score_id, attempts in rows}


def _record_sql(n: int) -> str:
    # the delivery rows are found through the score_id index (a join alone reads the whole table)
    return f"""
UPDATE score_deliveries AS d SET
  status = o.status, attempts = o.attempts, last_error = o.error, last_attempt_at = now(),
  next_attempt_at = CASE WHEN o.status = 'pending' THEN now() + to_microseconds(o.retry_us) END,
  delivered_at = CASE WHEN o.status = 'delivered' THEN now() ELSE d.delivered_at END,
  delivered_version = CASE WHEN o.status = 'delivered' THEN o.version ELSE d.delivered_version END,
  claimed_by = NULL, claimed_until = NULL
FROM (SELECT unnest(?::VARCHAR[]) AS score_id, unnest(?::BIGINT[]) AS version, unnest(?::VARCHAR[]) AS status,
             unnest(?::INTEGER[]) AS attempts, unnest(?::VARCHAR[]) AS error, unnest(?::BIGINT[]) AS retry_us) AS o
WHERE {key_in("d.score_id", n)} AND d.sink = ? AND d.score_id = o.score_id AND d.score_version = o.version
  AND d.claimed_by = ?
"""


def _mark_exported(con: Any, score_ids: Sequence[str], all_sinks: Sequence[str]) -> None:
    """Set ``scores.exported_at`` of those whose current version every sink delivered."""
    sinks = set(all_sinks)
    for part in chunks(sorted(set(score_ids))):
        marks = key_in("id", len(part))
        versions = dict(con.execute(f"SELECT id, epoch_us(updated_at) FROM scores WHERE {marks}", part).fetchall())
        delivered: dict[str, set[str]] = {}
        for score_id, sink, version in con.execute(
            f"SELECT score_id, sink, score_version FROM score_deliveries WHERE {key_in('score_id', len(part))} "
            "AND status = 'delivered'",
            part,
        ).fetchall():
            if sink in sinks and versions.get(score_id) == version:
                delivered.setdefault(score_id, set()).add(sink)
        done = [score_id for score_id, got in delivered.items() if got == sinks]
        for chunk in chunks(done):
            con.execute(f"UPDATE scores SET exported_at = now() WHERE {key_in('id', len(chunk))}", chunk)


def record(con: Any, sink: str, owner: str, outcomes: Sequence[DeliveryOutcome], all_sinks: Sequence[str]) -> int:
    """Store the outcomes of one export attempt and release their claims; returns rows updated.

    An outcome whose version is no longer the row's (re-scored meanwhile) or whose claim was
    lost is not stored. ``scores.exported_at`` is set once every sink in ``all_sinks`` delivered
    a score's current version.
    """
    if not outcomes:
        return 0
    updated = 0
    for start in range(0, len(outcomes), PAGE):
        part = outcomes[start : start + PAGE]
        ids = [o.score_id for o in part]
        row = con.execute(
            _record_sql(len(set(ids))),
            [
                ids,
                [o.version for o in part],
                [o.status for o in part],
                [o.attempts for o in part],
                [o.error for o in part],
                [int(max(0.0, o.retry_in_s) * 1e6) for o in part],
                *sorted(set(ids)),
                sink,
                owner,
            ],
        ).fetchall()
        updated += int(row[0][0]) if row else 0
    delivered = [o.score_id for o in outcomes if o.status == DELIVERED]
    if delivered:
        _mark_exported(con, delivered, all_sinks)
    return updated


def next_due_in(con: Any, sink: str) -> float | None:
    """Seconds until ``sink``'s earliest pending retry is due (0 if overdue), None if none waits."""
    rows = con.execute(
        "SELECT epoch_us(min(next_attempt_at)) - epoch_us(now()) FROM score_deliveries "
        "WHERE sink = ? AND status = 'pending' AND next_attempt_at IS NOT NULL",
        [sink],
    ).fetchall()
    if not rows or rows[0][0] is None:
        return None
    return max(0.0, float(rows[0][0]) / 1e6)


def states(con: Any, sink: str | None = None) -> list[dict[str, Any]]:
    """Delivery rows as dicts (for commands and tests), oldest first."""
    where, params = ("WHERE sink = ?", [sink]) if sink is not None else ("", [])
    cur = con.execute(
        "SELECT score_id, sink, score_version, status, attempts, last_error, delivered_at, delivered_version, "
        f"claimed_by FROM score_deliveries {where} ORDER BY score_id, sink",
        params,
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=False)) for r in cur.fetchall()]


class DeliveriesPart(Jobs):
    """:class:`~tracescorer.store.api.DeliveryStore` on the store process."""

    # per export sink: every score version before this is delivered or failed (:func:`read_due`)
    _settled: dict[str, int | None]

    async def due_deliveries(self, sink: str, owner: str, limit: int, ignore_backoff: bool = False) -> list[DueScore]:
        due, self._settled[sink] = await self.read(
            read_due, sink, owner, limit, ignore_backoff, self._settled.get(sink)
        )
        return due

    async def claim_deliveries(self, sink: str, owner: str, lease_s: float, claims: Sequence[Claim]) -> dict[str, int]:
        return await self.write(claim, sink, owner, lease_s, list(claims))

    async def record_deliveries(
        self, sink: str, owner: str, outcomes: Sequence[DeliveryOutcome], all_sinks: Sequence[str]
    ) -> int:
        return await self.write(record, sink, owner, list(outcomes), list(all_sinks))

    async def next_delivery_due_in(self, sink: str) -> float | None:
        return await self.read(next_due_in, sink)

    async def delivery_states(self, sink: str | None = None) -> list[dict[str, Any]]:
        return await self.read(states, sink)
