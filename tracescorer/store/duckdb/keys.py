"""Results retention in the DuckDB store, within the memory its key indexes may take.

DuckDB holds a table's key indexes (ART: the primary keys and ``runs_trace``) whole in memory,
inside ``memory_limit``, as soon as a write touches the table, and they grow with every row kept:
~66-74 bytes a key for the 32-character ids here (DuckDB 2.0), also in steady state when old rows
are deleted as new ones come. Measured with ``memory_limit`` at 128 MB, the store took ~470 bytes
a trace with two scorers and failed every write after ~260k traces ("could not allocate block"),
then its database was invalidated; with the default 1 GB that is ~2M traces, half an hour at 5k
spans/s. So the store counts its keys and, past a budget (a share of ``memory_limit``), deletes
the oldest results first, as it deletes results older than ``store.results_retention_days``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from tracescorer.store.api import ResultsPruned
from tracescorer.store.duckdb.jobs import Jobs

#: assembly records this much older than the newest are deleted with the results: a replay of the
#: segment log after a restart reaches back to the oldest trace not assembled yet (assembly.max_wait_s
#: before the stop, a backlog aside), and a replayed trace is told from a new one by its record
ASSEMBLY_KEEP = dt.timedelta(hours=1)

#: bytes of index memory budgeted per key (the measured 66-74, and a margin)
KEY_BYTES = 80

#: a pass over the budget deletes down to this share of it (so that it does not run every pass)
REFILL = 0.8

# table -> (key indexes on it, when a row was last written)
_TABLES: dict[str, tuple[int, str]] = {
    "runs": (2, "updated_at"),  # run_id, runs_trace
    "scores": (1, "updated_at"),
    "scoring_decisions": (1, "decided_at"),
    "score_deliveries": (1, "score_version"),
    "assembled_traces": (1, "assembled_at"),
    "evaluations": (1, "received_at"),  # other tools' evaluations; human labels are kept
}

_BEFORE = {
    # a delivery's version is its score's updated_at in epoch us: compared as stored, so row groups are skipped
    "score_deliveries": "score_version < epoch_us(?::TIMESTAMPTZ)",
}


def max_keys(memory_limit_bytes: int, share: float) -> int:
    """The keys the store's indexes may hold: ``share`` of ``memory_limit``."""
    return max(1, int(memory_limit_bytes * share / KEY_BYTES))


def _count(con: Any, table: str) -> int:
    return int(con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0])


def index_bytes(con: Any) -> int:
    """Memory DuckDB holds for key indexes now (what is loaded: after a checkpoint an index is
    read back by the next write that touches its table)."""
    rows = con.execute(
        "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() WHERE tag = 'ART_INDEX'"
    ).fetchall()
    return int(rows[0][0])


def plan_prune(
    con: Any,
    older_than: dt.datetime | None,
    budget: int | None,
    keep_assembly_after: dt.datetime,
    slice_keys: int = 20_000,
) -> dict[str, Any]:
    """Plan a retention pass (on a read cursor): results last written before ``older_than`` go and,
    when the tables hold more than ``budget`` keys, the oldest until they hold :data:`REFILL` of
    it; assembly records written after ``keep_assembly_after`` stay whatever the budget (recovery
    looks at their traces).

    Returns ``keys`` (now), ``budget_cutoff`` (when the budget deletes more than the age would)
    and ``steps``: increasing times up to the cutoff, ~``slice_keys`` keys apart, each the bound of
    one :func:`delete_before` transaction. One DELETE of a whole pass (~20% of the budget, ~1M
    keys by default) held the stage writer for seconds: runs and scores waited, the assembly
    backlog filled and intake was refused until it ended.
    """
    counts = {table: _count(con, table) for table in _TABLES}
    keys = sum(counts[table] * per_row for table, (per_row, _) in _TABLES.items())
    # the times rows were written, one per key (a run has two), of the rows that may go
    times = " UNION ALL ".join(
        [
            *(
                f"SELECT {column} AS t FROM {table}"
                for table, (per_row, column) in _TABLES.items()
                for _ in range(per_row)
                if table not in ("score_deliveries", "assembled_traces")
            ),
            "SELECT assembled_at FROM assembled_traces WHERE assembled_at < ?",
        ]
    )
    cutoff = older_than
    budget_cutoff: dt.datetime | None = None
    if budget is not None and keys > budget:
        kept = int(
            con.execute(
                "SELECT count(*) FROM assembled_traces WHERE assembled_at >= ?", [keep_assembly_after]
            ).fetchall()[0][0]
        )
        share = min(1.0, 1.0 - max(0.0, budget * REFILL - kept) / max(1, keys - kept))
        found = con.execute(f"SELECT quantile_disc(t, ?) FROM ({times})", [share, keep_assembly_after]).fetchall()
        budget_cutoff = found[0][0] if found else None
        if budget_cutoff is not None and older_than is not None and budget_cutoff <= older_than:
            budget_cutoff = None  # the age deletes as much
        if budget_cutoff is not None:
            cutoff = budget_cutoff
    steps: list[dt.datetime] = []
    if cutoff is not None:
        going = int(
            con.execute(f"SELECT count(*) FROM ({times}) WHERE t < ?", [keep_assembly_after, cutoff]).fetchall()[0][0]
        )
        slices = -(-going // max(1, slice_keys))
        if slices > 1:
            found = con.execute(
                f"SELECT quantile_disc(t, ?) FROM ({times}) WHERE t < ?",
                [[i / slices for i in range(1, slices)], keep_assembly_after, cutoff],
            ).fetchall()
            steps = sorted(set(found[0][0] or ()))
        steps.append(cutoff)
    return {
        "keys": keys,
        "steps": steps,
        "budget_cutoff": budget_cutoff.timestamp() if budget_cutoff is not None else None,
    }


def delete_before(con: Any, before: dt.datetime, keep_assembly_after: dt.datetime) -> dict[str, int]:
    """Delete the results last written before ``before`` (assembly records only up to
    ``keep_assembly_after``): one step of :func:`plan_prune`. Returns rows deleted per table."""
    deleted: dict[str, int] = {}
    for table, (_, column) in _TABLES.items():
        limit = min(before, keep_assembly_after) if table == "assembled_traces" else before
        rows = con.execute(f"DELETE FROM {table} WHERE {_BEFORE.get(table, f'{column} < ?')}", [limit]).fetchall()
        count = int(rows[0][0]) if rows else 0
        if count:
            deleted[table] = count
    return deleted


def assembly_keep_after(con: Any) -> dt.datetime:
    """Assembly records assembled after this are kept (:data:`ASSEMBLY_KEEP` before the newest)."""
    rows = con.execute("SELECT max(assembled_at) FROM assembled_traces").fetchall()
    newest = rows[0][0] if rows and rows[0][0] is not None else None
    if newest is None:
        return dt.datetime.fromtimestamp(0, dt.UTC)
    if newest.tzinfo is None:
        newest = newest.replace(tzinfo=dt.UTC)
    keep: dt.datetime = newest - ASSEMBLY_KEEP
    return keep


class RetentionPart(Jobs):
    """Results retention within the key-index budget (run by :mod:`tracescorer.store.maintenance`)."""

    max_index_keys: int
    prune_slice_keys: int

    async def prune_results(self, older_than: dt.datetime | None) -> ResultsPruned:
        keep_after = await self.read(assembly_keep_after)
        plan = await self.read(plan_prune, older_than, self.max_index_keys, keep_after, self.prune_slice_keys)
        deleted: dict[str, int] = {}
        for before in plan["steps"]:  # a transaction each: the stage writer's other writes run between them
            for table, count in (await self.write(delete_before, before, keep_after)).items():
                deleted[table] = deleted.get(table, 0) + count
        cutoff = plan["budget_cutoff"]
        return ResultsPruned(
            deleted=deleted,
            keys=plan["keys"],
            max_keys=self.max_index_keys,
            index_bytes=await self.read(index_bytes),
            transactions=len(plan["steps"]),
            budget_cutoff=None if cutoff is None else dt.datetime.fromtimestamp(cutoff, dt.UTC),
        )
