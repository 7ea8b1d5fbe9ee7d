"""Restart recovery of conversations on a DuckDB store whose clients coordinate (worker processes):
the claims find what was stamped as activity; recovery finds what they never saw, the runs stored
while the daemon ran without workers (nothing stamped then), so each is scored once, by one."""

from __future__ import annotations

from support import store_ops
from support.records import numbered_run

from tracescorer.store.duckdb import DuckDBStore


async def test_recovery_takes_the_conversations_claims_never_saw(tmp_path):
    path = tmp_path / "c.duckdb"
    shared = DuckDBStore(path, coordinate=True)  # a daemon with workers: activity stamped with the runs
    await shared.start()
    try:
        await shared.upsert_runs([numbered_run(1, "earlier")])
        # scored and finished by a claim an hour ago, as a daemon with workers left it
        await shared.write(
            store_ops.execute,
            "UPDATE conversation_activity SET last_activity = last_activity - INTERVAL 1 HOUR, "
            "scored_seq = activity_seq",
            [],
        )
    finally:
        await shared.stop()
    alone = DuckDBStore(path)  # then without workers: nothing stamped
    await alone.start()
    try:
        await alone.upsert_runs([numbered_run(2, "earlier"), numbered_run(3, "untracked")])
    finally:
        await alone.stop()
    shared = DuckDBStore(path, coordinate=True)  # with workers again
    await shared.start()
    try:
        await shared.upsert_runs([numbered_run(4, "tracked")])
        found = await shared.unscored_recent([], window_s=3 * 3600, conversation_scorer_ids=["s"])
        assert sorted(found.conversation_ids) == ["earlier", "untracked"]
        claims = await shared.claim_conversations(idle_s=0, lease_s=30, limit=10, max_age_s=3 * 3600)
        assert [c.conversation_id for c in claims] == ["tracked"]
    finally:
        await shared.stop()
