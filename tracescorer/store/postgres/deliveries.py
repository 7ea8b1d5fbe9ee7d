"""Per-sink delivery state of exported scores in PostgreSQL (semantics: :mod:`tracescorer.store.duckdb.deliveries`).

Claims are what make "each score exported once per sink" hold with several daemons: the claim is
one ``INSERT … ON CONFLICT DO UPDATE … WHERE`` over the batch, and PostgreSQL re-checks its
``WHERE`` (no live lease of another owner) on the latest row version after waiting for a
concurrent claimant, so of two daemons claiming the same score version one gets it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracescorer.records.deliveries import (
    DELIVERED,
    Claim,
    DeliveryOutcome,
    DueScore,
    conversations_of,
    with_first_runs,
)
from tracescorer.store.postgres.tx import Tx

Conn = Any

_FIELDS = [
    "id", "scorer_id", "scorer_name", "run_id", "trace_id", "span_id", "conversation_id", "entity_type", "score",
    "reason", "status", "error", "error_type", "label", "threshold", "judge_model", "judge_cost_usd", "duration_ms",
    "scorer_version",
]  # fmt: skip

_VERSION = "(EXTRACT(EPOCH FROM s.updated_at) * 1000000)::int8"

_DUE_SQL = f"""
SELECT {", ".join("s." + f for f in _FIELDS)}, {_VERSION} AS version,
       r.ended_at_unix_nano, r.service_name,
       CASE WHEN d.score_version = {_VERSION} THEN d.attempts ELSE 0 END, d.delivered_version
FROM scores s
LEFT JOIN score_deliveries d ON d.score_id = s.id AND d.sink = %(sink)s
LEFT JOIN runs r ON r.run_id = s.run_id
WHERE s.updated_at IS NOT NULL
  AND (d.score_id IS NULL OR d.score_version <> {_VERSION}
       OR (d.status = 'pending' AND (%(now)s OR d.next_attempt_at IS NULL OR d.next_attempt_at <= now())))
  AND (d.claimed_until IS NULL OR d.claimed_until <= now() OR d.claimed_by = %(owner)s)
ORDER BY s.updated_at, s.id
LIMIT %(limit)s
"""

_FIRST_RUNS_SQL = """
SELECT conversation_id, (array_agg(trace_id ORDER BY started_at_unix_nano, run_id))[1],
       (array_agg(span_id ORDER BY started_at_unix_nano, run_id))[1]
FROM runs WHERE conversation_id = ANY(%s::text[]) GROUP BY conversation_id
"""


async def read_due(conn: Conn, sink: str, owner: str, limit: int, ignore_backoff: bool = False) -> list[DueScore]:
    cur = await conn.execute(_DUE_SQL, {"sink": sink, "owner": owner, "limit": limit, "now": ignore_backoff})
    rows = await cur.fetchall()
    n = len(_FIELDS)
    due = [
        DueScore(
            **dict(zip(_FIELDS, row[:n], strict=False)),
            version=int(row[n]),
            scored_end_unix_nano=row[n + 1],
            service_name=row[n + 2],
            attempts=int(row[n + 3]),
            delivered_version=row[n + 4],
        )
        for row in rows
    ]
    conversations = conversations_of(due)
    if not conversations:
        return due
    cur = await conn.execute(_FIRST_RUNS_SQL, [conversations])
    return with_first_runs(due, {c: (t, s) for c, t, s in await cur.fetchall()})


_CLAIM_SQL = """
INSERT INTO score_deliveries AS d (score_id, sink, score_version, status, attempts, claimed_by, claimed_until)
SELECT c.id, %(sink)s, c.version, 'pending', 0, %(owner)s, now() + make_interval(secs => %(lease)s)
FROM unnest(%(ids)s::text[], %(versions)s::int8[]) AS c(id, version)
ON CONFLICT (score_id, sink) DO UPDATE SET
  attempts = CASE WHEN d.score_version = excluded.score_version THEN d.attempts ELSE 0 END,
  status = CASE WHEN d.score_version = excluded.score_version THEN d.status ELSE 'pending' END,
  score_version = excluded.score_version, claimed_by = excluded.claimed_by, claimed_until = excluded.claimed_until
WHERE d.claimed_until IS NULL OR d.claimed_until <= now() OR d.claimed_by = excluded.claimed_by
RETURNING score_id, attempts
"""


async def claim(conn: Conn, sink: str, owner: str, lease_s: float, claims: Sequence[Claim]) -> dict[str, int]:
    if not claims:
        return {}
    ordered = sorted({c.score_id: c for c in claims}.values(), key=lambda c: c.score_id)
    cur = await conn.execute(
        _CLAIM_SQL,
        {
            "sink": sink,
            "owner": owner,
            "lease": lease_s,
            "ids": [c.score_id for c in ordered],
            "versions": [c.version for c in ordered],
        },
    )
    return {r[0]: int(r[1]) for r in await cur.fetchall()}


_RECORD_SQL = """
UPDATE score_deliveries AS d SET
  status = o.status, attempts = o.attempts, last_error = o.error, last_attempt_at = now(),
  next_attempt_at = CASE WHEN o.status = 'pending' THEN now() + make_interval(secs => o.retry_s) END,
  delivered_at = CASE WHEN o.status = 'delivered' THEN now() ELSE d.delivered_at END,
  delivered_version = CASE WHEN o.status = 'delivered' THEN o.version ELSE d.delivered_version END,
  claimed_by = NULL, claimed_until = NULL
FROM unnest(%s::text[], %s::int8[], %s::text[], %s::int4[], %s::text[], %s::float8[])
     AS o(score_id, version, status, attempts, error, retry_s)
WHERE d.sink = %s AND d.score_id = o.score_id AND d.score_version = o.version AND d.claimed_by = %s
"""

_EXPORTED_SQL = f"""
UPDATE scores s SET exported_at = now()
WHERE s.id = ANY(%s::text[]) AND (
  SELECT count(*) FROM score_deliveries d
  WHERE d.score_id = s.id AND d.score_version = {_VERSION} AND d.status = 'delivered'
    AND d.sink = ANY(%s::text[])) = %s
"""


async def record(
    conn: Conn, sink: str, owner: str, outcomes: Sequence[DeliveryOutcome], all_sinks: Sequence[str]
) -> int:
    if not outcomes:
        return 0
    ordered = sorted(outcomes, key=lambda o: o.score_id)
    cur = await conn.execute(
        _RECORD_SQL,
        [
            [o.score_id for o in ordered],
            [o.version for o in ordered],
            [o.status for o in ordered],
            [o.attempts for o in ordered],
            [o.error.replace("\x00", "") if o.error else o.error for o in ordered],
            [max(0.0, o.retry_in_s) for o in ordered],
            sink,
            owner,
        ],
    )
    updated = cur.rowcount
    delivered = [o.score_id for o in ordered if o.status == DELIVERED]
    if delivered:
        await conn.execute(_EXPORTED_SQL, [delivered, list(all_sinks), len(set(all_sinks))])
    return int(updated)


async def next_due_in(conn: Conn, sink: str) -> float | None:
    cur = await conn.execute(
        "SELECT EXTRACT(EPOCH FROM min(next_attempt_at) - now())::float8 FROM score_deliveries "
        "WHERE sink = %s AND status = 'pending' AND next_attempt_at IS NOT NULL",
        [sink],
    )
    row = await cur.fetchone()
    if row is None or row[0] is None:
        return None
    return max(0.0, float(row[0]))


async def states(conn: Conn, sink: str | None = None) -> list[dict[str, Any]]:
    where, params = ("WHERE sink = %s", [sink]) if sink is not None else ("", [])
    cur = await conn.execute(
        "SELECT score_id, sink, score_version, status, attempts, last_error, delivered_at, delivered_version, "
        f"claimed_by FROM score_deliveries {where} ORDER BY score_id, sink",
        params,
    )
    names = [d.name for d in cur.description or []]
    return [dict(zip(names, r, strict=False)) for r in await cur.fetchall()]


class DeliveriesPart(Tx):
    """:class:`~tracescorer.store.api.DeliveryStore` in PostgreSQL."""

    async def due_deliveries(self, sink: str, owner: str, limit: int, ignore_backoff: bool = False) -> list[DueScore]:
        return await self._tx(read_due, sink, owner, limit, ignore_backoff, write=False)

    async def claim_deliveries(self, sink: str, owner: str, lease_s: float, claims_: Sequence[Claim]) -> dict[str, int]:
        return await self._tx(claim, sink, owner, lease_s, list(claims_))

    async def record_deliveries(
        self, sink: str, owner: str, outcomes: Sequence[DeliveryOutcome], all_sinks: Sequence[str]
    ) -> int:
        return await self._tx(record, sink, owner, list(outcomes), list(all_sinks))

    async def next_delivery_due_in(self, sink: str) -> float | None:
        return await self._tx(next_due_in, sink, write=False)

    async def delivery_states(self, sink: str | None = None) -> list[dict[str, Any]]:
        return await self._tx(states, sink, write=False)
