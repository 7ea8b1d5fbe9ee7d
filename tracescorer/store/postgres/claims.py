"""Coordination of several daemons in PostgreSQL: conversation claims, the judge token bucket,
daemon registration. Async functions ``op(conn, *args)`` run in a transaction of their own.

A conversation is *due* when a run of it was stored after its last finished scoring
(``activity_seq > scored_seq``) and nothing was stored for ``idle_s`` (the database's clock, so
activity on every daemon counts). :func:`claim_due` takes due conversations with ``FOR UPDATE SKIP
LOCKED`` and gives the claimant a lease; concurrent claimants skip each other's rows, and a lease
that ran out (its daemon died or hangs) can be taken over. :func:`finish` records the activity a
scoring covered and releases the claim; a turn stored meanwhile makes the conversation due again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracescorer.store.api import ConversationClaim
from tracescorer.store.postgres.tx import Tx

Conn = Any


_CLAIM_SQL = """
WITH due AS (
  SELECT conversation_id, claimed_by IS NOT NULL AND claimed_by <> %(owner)s AS takeover
  FROM conversation_activity
  WHERE (scored_seq IS NULL OR scored_seq < activity_seq)
    AND last_activity <= now() - make_interval(secs => %(idle)s)
    AND last_activity >= now() - make_interval(secs => %(max_age)s)
    AND (claimed_until IS NULL OR claimed_until < now())
  ORDER BY last_activity
  LIMIT %(limit)s
  FOR UPDATE SKIP LOCKED
)
UPDATE conversation_activity c
SET claimed_by = %(owner)s, claimed_until = now() + make_interval(secs => %(lease)s),
    takeovers = c.takeovers + CASE WHEN due.takeover THEN 1 ELSE 0 END
FROM due WHERE c.conversation_id = due.conversation_id
RETURNING c.conversation_id, c.activity_seq, due.takeover
"""


async def claim_due(
    conn: Conn, owner: str, idle_s: float, lease_s: float, limit: int, max_age_s: float
) -> list[ConversationClaim]:
    if limit <= 0:
        return []
    cur = await conn.execute(
        _CLAIM_SQL, {"owner": owner, "idle": idle_s, "lease": lease_s, "limit": limit, "max_age": max_age_s}
    )
    return [ConversationClaim(conversation_id=r[0], seq=int(r[1]), takeover=bool(r[2])) for r in await cur.fetchall()]


async def renew(conn: Conn, owner: str, conversation_ids: Sequence[str], lease_s: float) -> list[str]:
    """Extend this owner's leases; returns the ids still held (a lost one was taken over)."""
    if not conversation_ids:
        return []
    cur = await conn.execute(
        "UPDATE conversation_activity SET claimed_until = now() + make_interval(secs => %s) "
        "WHERE claimed_by = %s AND conversation_id = ANY(%s::text[]) RETURNING conversation_id",
        [lease_s, owner, sorted(conversation_ids)],
    )
    return [r[0] for r in await cur.fetchall()]


async def finish(conn: Conn, owner: str, done: Sequence[tuple[str, int]], release: Sequence[str]) -> int:
    """Record finished scorings (conversation id, activity seq covered) and release those claims;
    release ``release`` without recording anything (scoring abandoned: due again at once).
    Returns how many finished scorings still held their claim."""
    finished = 0
    if done:
        ordered = sorted(done)
        cur = await conn.execute(
            "UPDATE conversation_activity c SET scored_seq = GREATEST(coalesce(c.scored_seq, 0), d.seq), "
            "scored_at = now(), claimed_by = NULL, claimed_until = NULL "
            "FROM unnest(%s::text[], %s::int8[]) AS d(id, seq) WHERE c.conversation_id = d.id AND c.claimed_by = %s",
            [[d[0] for d in ordered], [d[1] for d in ordered], owner],
        )
        finished = cur.rowcount
    if release:
        await conn.execute(
            "UPDATE conversation_activity SET claimed_by = NULL, claimed_until = NULL "
            "WHERE claimed_by = %s AND conversation_id = ANY(%s::text[])",
            [owner, sorted(release)],
        )
    return int(finished)


_TOKENS_SQL = """
WITH cur AS (
  SELECT tokens, updated_at, clock_timestamp() AS at FROM judge_tokens WHERE bucket = %(bucket)s FOR UPDATE
), avail AS (
  SELECT LEAST(%(capacity)s, tokens + EXTRACT(EPOCH FROM at - updated_at)::float8 * %(rate)s) AS n, at FROM cur
)
UPDATE judge_tokens t
SET tokens = CASE WHEN avail.n >= %(want)s THEN avail.n - %(want)s ELSE avail.n END, updated_at = avail.at
FROM avail WHERE t.bucket = %(bucket)s
RETURNING avail.n
"""


async def take_tokens(conn: Conn, bucket: str, want: float, capacity: float, per_s: float) -> float:
    """Take ``want`` tokens from the shared bucket (refilled at ``per_s``, at most ``capacity``):
    0 when taken, else the seconds until enough will have been refilled (nothing taken then)."""
    want = min(want, capacity)
    await conn.execute(
        "INSERT INTO judge_tokens (bucket, tokens, updated_at) VALUES (%s, %s, clock_timestamp()) "
        "ON CONFLICT (bucket) DO NOTHING",
        [bucket, capacity],
    )
    cur = await conn.execute(_TOKENS_SQL, {"bucket": bucket, "want": want, "capacity": capacity, "rate": per_s})
    row = await cur.fetchone()
    available = float(row[0]) if row else capacity
    return 0.0 if available >= want else max(0.005, (want - available) / per_s)


async def register_daemon(conn: Conn, instance_id: str, owner: str, host: str) -> str | None:
    """Record this daemon's current owner id; release the claims its previous process left, its
    worker processes' included (``<owner>/<worker>``: conversations and export deliveries: they are
    due again at once). Returns the old owner."""
    cur = await conn.execute("SELECT owner FROM daemons WHERE instance_id = %s FOR UPDATE", [instance_id])
    row = await cur.fetchone()
    old = row[0] if row else None
    if old and old != owner:
        await conn.execute(
            "UPDATE conversation_activity SET claimed_by = NULL, claimed_until = NULL "
            "WHERE claimed_by = %s OR starts_with(claimed_by, %s)",
            [old, old + "/"],
        )
        await conn.execute(
            "UPDATE score_deliveries SET claimed_by = NULL, claimed_until = NULL WHERE claimed_by = %s", [old]
        )
    await conn.execute(
        "INSERT INTO daemons AS d (instance_id, owner, host, started_at, seen_at) VALUES (%s, %s, %s, now(), now()) "
        "ON CONFLICT (instance_id) DO UPDATE SET owner = excluded.owner, host = excluded.host, "
        "started_at = excluded.started_at, seen_at = now()",
        [instance_id, owner, host],
    )
    return str(old) if old else None


async def conversation_stats(conn: Conn) -> dict[str, int]:
    """Due, claimed and taken-over counts (for metrics, the bench and tests)."""
    cur = await conn.execute(
        "SELECT count(*) FILTER (WHERE scored_seq IS NULL OR scored_seq < activity_seq), "
        "count(*) FILTER (WHERE claimed_until > now()), coalesce(sum(takeovers), 0) FROM conversation_activity"
    )
    row = await cur.fetchone()
    return {"unscored": int(row[0]), "claimed": int(row[1]), "takeovers": int(row[2])}


class CoordinationPart(Tx):
    """:class:`~tracescorer.store.api.Coordination` in PostgreSQL."""

    async def claim_conversations(
        self, *, idle_s: float, lease_s: float, limit: int, max_age_s: float
    ) -> list[ConversationClaim]:
        return await self._tx(claim_due, self.owner, idle_s, lease_s, limit, max_age_s)

    async def renew_conversations(self, conversation_ids: Sequence[str], lease_s: float) -> list[str]:
        return await self._tx(renew, self.owner, list(conversation_ids), lease_s)

    async def finish_conversations(self, done: Sequence[tuple[str, int]], release: Sequence[str] = ()) -> int:
        return await self._tx(finish, self.owner, list(done), list(release))

    async def take_judge_tokens(self, bucket: str, tokens: float, capacity: float, per_s: float) -> float:
        return await self._tx(take_tokens, bucket, tokens, capacity, per_s)

    async def conversation_stats(self) -> dict[str, int]:
        return await self._tx(conversation_stats, write=False)
