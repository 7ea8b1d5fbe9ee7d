"""Coordination of the clients of one DuckDB store process (the daemon's worker processes):
conversation claims and the judge token buckets, with the semantics of PostgreSQL mode
(:mod:`tracescorer.store.postgres.claims`).

A conversation is *due* when a run of it was stored after its last finished scoring
(``activity_seq > scored_seq``) and nothing was stored for ``idle_s``. The runs part stamps the
activity in the transaction that stores the runs (:func:`touch`, when the store coordinates). Every
time is the store process's clock (``time.time()`` inside the job), which all clients share.

Claims, renewals, finishes and token takes are write jobs: the store process's stage writer runs
them one after the other, so two clients never get the same conversation (no ``SKIP LOCKED``
needed). They are committed at once (:func:`~tracescorer.store.duckdb.jobs.prompt`): with the
results delay (0.15 s by default) a judge token took ~158 ms instead of ~5 ms, and the shared rate
limiter, which takes tokens one at a time, could not pass ~6 judge requests a second per client. A claimant is the ``owner`` its :class:`~tracescorer.store.duckdb.store.DuckDBStore` was
made with; a lease that ran out (its worker died or hangs) is taken over by the next claim, and
counted in ``takeovers``. The tables are created by schema version 12; results retention deletes
activity rows with the runs (:mod:`tracescorer.store.duckdb.keys`), never one under a live lease.

Every function here is ``op(con, *args)`` with plain-data arguments and results, run in the store
process.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Sequence
from functools import cache
from typing import Any

from tracescorer.store.api import ConversationClaim
from tracescorer.store.duckdb.jobs import Jobs, prompt
from tracescorer.store.duckdb.upsert import chunks, key_in


def default_owner() -> str:
    """A claimant id unique to this process: host, pid and a random part (a restart is a new owner)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


# --- run in the store process ------------------------------------------------------------------------

_TOUCH_SQL = """
MERGE INTO conversation_activity AS c USING (SELECT unnest(?::VARCHAR[]) AS id, to_timestamp(?) AS at) AS t
ON c.conversation_id = t.id
WHEN MATCHED THEN UPDATE SET last_activity = t.at, activity_seq = c.activity_seq + 1
WHEN NOT MATCHED THEN INSERT (conversation_id, last_activity, activity_seq) VALUES (t.id, t.at, 1)
"""
_TOUCH_SQL_BEFORE_MERGE = """
INSERT INTO conversation_activity AS c (conversation_id, last_activity, activity_seq)
SELECT id, to_timestamp(?), 1 FROM unnest(?::VARCHAR[]) AS t(id)
ON CONFLICT (conversation_id) DO UPDATE SET last_activity = excluded.last_activity, activity_seq = c.activity_seq + 1
"""


@cache
def _merges() -> bool:
    """Whether DuckDB has MERGE (1.4+): ~1.5 ms a touch where ON CONFLICT costs ~2.5 ms, whether
    20 or 200 conversations and however many are stored (the key's index answers both)."""
    import duckdb  # the store process only

    return tuple(int(part) for part in duckdb.__version__.split(".")[:2]) >= (1, 4)


def touch(con: Any, conversation_ids: Sequence[str]) -> None:
    """Mark conversations active now (inside the transaction that stores their runs): each gets a
    new ``activity_seq``, once per call however many of its runs came."""
    ids = sorted(set(conversation_ids))
    if ids:
        if _merges():
            con.execute(_TOUCH_SQL, [ids, time.time()])
        else:
            con.execute(_TOUCH_SQL_BEFORE_MERGE, [time.time(), ids])


_DUE_SQL = """
SELECT conversation_id, activity_seq, claimed_by IS NOT NULL AND claimed_by <> ? AS takeover
FROM conversation_activity
WHERE (scored_seq IS NULL OR scored_seq < activity_seq)
  AND last_activity <= to_timestamp(?) AND last_activity >= to_timestamp(?)
  AND (claimed_until IS NULL OR claimed_until < to_timestamp(?))
ORDER BY last_activity, conversation_id
LIMIT ?
"""


@prompt
def claim_due(
    con: Any, owner: str, idle_s: float, lease_s: float, limit: int, max_age_s: float
) -> list[tuple[str, int, bool]]:
    """Claim up to ``limit`` due conversations nobody holds a live lease on, for ``lease_s``;
    ``(conversation id, activity seq, taken over)`` of each."""
    if limit <= 0:
        return []
    now = time.time()
    due = con.execute(_DUE_SQL, [owner, now - idle_s, now - max_age_s, now, limit]).fetchall()
    ids = [r[0] for r in due]
    for part in chunks(ids):
        con.execute(
            "UPDATE conversation_activity SET claimed_by = ?, claimed_until = to_timestamp(?), "
            "takeovers = takeovers + CASE WHEN claimed_by IS NOT NULL AND claimed_by <> ? THEN 1 ELSE 0 END "
            f"WHERE {key_in('conversation_id', len(part))}",
            [owner, now + lease_s, owner, *part],
        )
    return [(str(r[0]), int(r[1]), bool(r[2])) for r in due]


@prompt
def renew(con: Any, owner: str, conversation_ids: Sequence[str], lease_s: float) -> list[str]:
    """Extend this owner's leases; the ids still held (a lost one was taken over)."""
    held: list[str] = []
    until = time.time() + lease_s
    for part in chunks(sorted(set(conversation_ids))):
        held += [
            str(r[0])
            for r in con.execute(
                "UPDATE conversation_activity SET claimed_until = to_timestamp(?) "
                f"WHERE claimed_by = ? AND {key_in('conversation_id', len(part))} RETURNING conversation_id",
                [until, owner, *part],
            ).fetchall()
        ]
    return held


@prompt
def finish(con: Any, owner: str, done: Sequence[tuple[str, int]], release: Sequence[str]) -> int:
    """Record finished scorings (conversation id, activity seq covered) and release those claims;
    release ``release`` without recording anything (scoring abandoned: due again at once). Returns
    how many finished scorings still held their claim."""
    now = time.time()
    covered: dict[str, int] = {}
    for cid, seq in done:
        covered[cid] = max(seq, covered.get(cid, seq))
    finished = 0
    ids = sorted(covered)
    for part in chunks(ids):
        # each row's seq looked up by its id in the lists, so the update goes through the key's index
        finished += len(
            con.execute(
                "UPDATE conversation_activity SET scored_seq = greatest(coalesce(scored_seq, 0), "
                "list_extract(?::BIGINT[], list_position(?::VARCHAR[], conversation_id))), "
                "scored_at = to_timestamp(?), claimed_by = NULL, claimed_until = NULL "
                f"WHERE claimed_by = ? AND {key_in('conversation_id', len(part))} RETURNING conversation_id",
                [[covered[c] for c in part], part, now, owner, *part],
            ).fetchall()
        )
    for part in chunks(sorted(set(release))):
        con.execute(
            "UPDATE conversation_activity SET claimed_by = NULL, claimed_until = NULL "
            f"WHERE claimed_by = ? AND {key_in('conversation_id', len(part))}",
            [owner, *part],
        )
    return finished


@prompt
def release_claims(con: Any, owner: str | None) -> int:
    """Release every claim of ``owner`` (None: of anyone), unscored; claims released."""
    where = "claimed_by IS NOT NULL" if owner is None else "claimed_by = ?"
    rows = con.execute(
        f"UPDATE conversation_activity SET claimed_by = NULL, claimed_until = NULL WHERE {where} "
        "RETURNING conversation_id",
        [] if owner is None else [owner],
    ).fetchall()
    return len(rows)


@prompt
def take_tokens(con: Any, bucket: str, want: float, capacity: float, per_s: float) -> float:
    """Take ``want`` tokens from the bucket (refilled at ``per_s``, at most ``capacity``; a new
    bucket starts full): 0 when taken, else the seconds until enough will have been refilled
    (nothing taken then)."""
    want = min(want, capacity)
    now = time.time()
    row = con.execute(
        "SELECT tokens, epoch_us(updated_at) / 1e6 FROM judge_tokens WHERE bucket = ?", [bucket]
    ).fetchall()
    if row:
        # a clock set back refills nothing (rather than taking tokens away)
        available = min(capacity, float(row[0][0]) + max(0.0, now - float(row[0][1])) * per_s)
        left = available - want if available >= want else available
        con.execute(
            "UPDATE judge_tokens SET tokens = ?, updated_at = to_timestamp(?) WHERE bucket = ?", [left, now, bucket]
        )
    else:
        available = capacity
        con.execute(
            "INSERT INTO judge_tokens (bucket, tokens, updated_at) VALUES (?, ?, to_timestamp(?))",
            [bucket, capacity - want, now],
        )
    return 0.0 if available >= want else max(0.005, (want - available) / per_s)


def conversation_stats(con: Any) -> dict[str, int]:
    """Due (unscored), claimed and taken-over counts (for metrics, the bench and tests)."""
    row = con.execute(
        "SELECT count(*) FILTER (WHERE scored_seq IS NULL OR scored_seq < activity_seq), "
        "count(*) FILTER (WHERE claimed_until > to_timestamp(?)), coalesce(sum(takeovers), 0) "
        "FROM conversation_activity",
        [time.time()],
    ).fetchall()[0]
    return {"unscored": int(row[0]), "claimed": int(row[1]), "takeovers": int(row[2])}


# --- the daemon's side -------------------------------------------------------------------------------


class CoordinationPart(Jobs):
    """:class:`~tracescorer.store.api.Coordination` on the store process, as ``owner``."""

    owner: str

    async def claim_conversations(
        self, *, idle_s: float, lease_s: float, limit: int, max_age_s: float
    ) -> list[ConversationClaim]:
        if limit <= 0:
            return []
        claimed = await self.write(claim_due, self.owner, idle_s, lease_s, limit, max_age_s)
        return [ConversationClaim(conversation_id=c, seq=s, takeover=t) for c, s, t in claimed]

    async def renew_conversations(self, conversation_ids: Sequence[str], lease_s: float) -> list[str]:
        if not conversation_ids:
            return []
        return await self.write(renew, self.owner, list(conversation_ids), lease_s)

    async def finish_conversations(self, done: Sequence[tuple[str, int]], release: Sequence[str] = ()) -> int:
        if not done and not release:
            return 0
        return await self.write(finish, self.owner, [(c, int(s)) for c, s in done], list(release))

    async def release_conversation_claims(self, *, everyone: bool = False) -> int:
        """Release this owner's claims (``everyone``: every owner's, e.g. at a daemon's start,
        before any worker claims: the previous processes' claims are due again at once instead of
        when their leases run out); claims released."""
        return await self.write(release_claims, None if everyone else self.owner)

    async def take_judge_tokens(self, bucket: str, tokens: float, capacity: float, per_s: float) -> float:
        return await self.write(take_tokens, bucket, tokens, capacity, per_s)

    async def conversation_stats(self) -> dict[str, int]:
        return await self.read(conversation_stats)
