"""Results retention keeps the assembly records a replay of the segment log may still ask about:
those assembled within ``ASSEMBLY_KEEP`` of the newest (a daemon stopped for days keeps the records
of its last hour, however old they are by the clock)."""

from __future__ import annotations

import datetime as dt

from support import store_ops
from support.db import scalar
from support.records import assembly_record

from tracescorer.store.duckdb import DuckDBStore
from tracescorer.store.duckdb.keys import ASSEMBLY_KEEP

LATER = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)  # retention asks to delete everything before


async def test_retention_keeps_the_assembly_records_near_the_newest(tmp_path):
    store = DuckDBStore(tmp_path / "r.duckdb")
    await store.start()
    try:
        await store.record_assembly([assembly_record(f"{i:032x}") for i in range(10)])
        older = ASSEMBLY_KEEP + dt.timedelta(minutes=1)
        await store.write(
            store_ops.execute,
            "UPDATE assembled_traces SET assembled_at = assembled_at - to_microseconds(?) WHERE trace_id < ?",
            [int(older.total_seconds() * 1e6), f"{4:032x}"],
        )
        pruned = await store.prune_results(LATER)
        assert pruned.deleted.get("assembled_traces", 0) == 4
        assert await scalar(store, "SELECT count(*) FROM assembled_traces") == 6
    finally:
        await store.stop()
