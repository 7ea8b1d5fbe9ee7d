"""Results retention keeps the assembly records the recovery of the daemon's *current* feeds may
read: each feed's assembled-through mark (less the recovery margin) counts, a feed without a mark
counts from the oldest mark, and the marks of feeds the daemon no longer runs (an earlier worker
count) do not hold records forever."""

from __future__ import annotations

import datetime as dt

import pytest
from support.daemon import plain_settings
from support.db import scalar
from support.records import assembly_record

from tracescorer.app import App
from tracescorer.store.duckdb import DuckDBStore
from tracescorer.store.duckdb.spanlog import RECOVERY_MARGIN, assembled_marks, recovery_since

NOW = dt.datetime.now(dt.UTC)
LATER = NOW + dt.timedelta(hours=1)  # a mark past every record written by the test
LONG_AGO = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
WORKERS = ("w0/2", "w1/2")


def test_recovery_since_follows_each_feeds_own_mark():
    marks = {"": LONG_AGO.isoformat(), "w0/2": LATER.isoformat(), "w1/2": NOW.isoformat()}
    assert recovery_since(marks, ["w0/2"]) == LATER - RECOVERY_MARGIN
    assert recovery_since(marks, WORKERS) == NOW - RECOVERY_MARGIN  # the stale "" does not count
    assert recovery_since(marks, ["w2/3"]) == LONG_AGO - RECOVERY_MARGIN  # new: from the oldest of all
    assert recovery_since({}, WORKERS) == dt.datetime.fromtimestamp(0, dt.UTC)


@pytest.mark.parametrize(
    ("marks", "deleted"),
    [
        ({"w0/2": LATER, "w1/2": LATER, "": LONG_AGO}, 10),  # a worker count's feeds are past them
        ({"w0/2": LATER, "w1/2": LONG_AGO}, 0),  # one feed's recovery may still read them
        ({"w0/2": LATER, "": LONG_AGO}, 0),  # w1/2 has no mark yet: it recovers from the oldest
    ],
)
async def test_a_worker_daemons_retention_deletes_assembly_records_its_feeds_are_past(tmp_path, marks, deleted):
    store = DuckDBStore(tmp_path / "r.duckdb", assembly_consumers=WORKERS)
    await store.start()
    try:
        await store.record_assembly([assembly_record(f"{i:032x}") for i in range(10)])
        for consumer, when in marks.items():
            await store.set_assembled_through(when, consumer)
        pruned = await store.prune_results(LATER)
        assert pruned.deleted.get("assembled_traces", 0) == deleted
        assert await scalar(store, "SELECT count(*) FROM assembled_traces") == 10 - deleted
    finally:
        await store.stop()


@pytest.mark.parametrize(("count", "expected"), [(2, WORKERS), (0, ("",))])
def test_the_daemon_tells_its_store_its_feeds(tmp_path, count, expected):
    settings = plain_settings(tmp_path, workers={"count": count})
    assert App(settings).stores.span_log.assembly_consumers == expected  # type: ignore[attr-defined]


async def test_marks_of_feeds_the_daemon_no_longer_runs_go_once_each_current_feed_has_its_own(tmp_path):
    """0 workers (mark ""), then 2: once w0/2 and w1/2 have marks, "" goes, so a later start with
    0 workers recovers from the workers' marks, not from its own old one (records since deleted)."""
    path = tmp_path / "m.duckdb"
    store = DuckDBStore(path, assembly_consumers=WORKERS)
    await store.start()
    try:
        await store.set_assembled_through(LONG_AGO, "")
        await store.set_assembled_through(LATER, "w0/2")
        await store.prune_results(None)
        assert set(await store.read(assembled_marks)) == {"", "w0/2"}  # w1/2 has none yet: "" still counts
        await store.set_assembled_through(LATER, "w1/2")
        await store.prune_results(None)
        assert set(await store.read(assembled_marks)) == {"w0/2", "w1/2"}
    finally:
        await store.stop()
    again = DuckDBStore(path)  # back to 0 workers
    await again.start()
    try:
        assert recovery_since(await again.read(assembled_marks), [""]) == LATER - RECOVERY_MARGIN
    finally:
        await again.stop()
