"""Assembly's progress (real DuckDB store): a feed new to the store stores a mark of its own at its
first start; no mark is stored while recovery still has traces to list (a mark then could pass
traces of later batches, which no buffer holds yet); recovery lists its next batch only once the
last one is stored (listed before, oldest first, it met the same traces again and stopped)."""

from __future__ import annotations

import asyncio
import datetime as dt

from support.daemon import wait_for_async
from support.records import assembly_record
from support.spans import agent_root

from tracescorer.assembly.buffer import TraceBuffer
from tracescorer.assembly.progress import Progress
from tracescorer.assembly.stage import AssemblyStage
from tracescorer.config import AssemblySettings
from tracescorer.metrics import Metrics
from tracescorer.store.duckdb import DuckDBStore
from tracescorer.store.duckdb.spanlog import assembled_marks


async def test_a_feed_new_to_the_store_stores_its_mark_at_start(tmp_path):
    store = DuckDBStore(tmp_path / "p.duckdb")
    await store.start()
    try:
        await store.set_assembled_through(dt.datetime.now(dt.UTC), "w0/2")
        stage = AssemblyStage(AssemblySettings(idle_s=0.05), store, store, Metrics(), consumer="w1/2", share=(1, 2))
        await stage.start()
        try:
            await wait_for_async(
                lambda: _has_mark(store, "w1/2"), 20, what="w1/2's mark stored though it assembled nothing"
            )
        finally:
            await stage.stop(asyncio.get_running_loop().time() + 5)
    finally:
        await store.stop()


async def _has_mark(store: DuckDBStore, consumer: str) -> bool:
    return consumer in await store.read(assembled_marks)


async def test_no_mark_is_stored_while_recovery_has_traces_to_list(tmp_path):
    store = DuckDBStore(tmp_path / "p.duckdb")
    await store.start()
    try:
        await store.append([agent_root(i) for i in range(4)])  # four traces never assembled
        buffer = TraceBuffer(idle_s=0.01, max_traces=2)  # recovered one at a time
        taken: list = []  # handed out by the buffer, assembly not stored yet
        progress = Progress(store, buffer, Metrics(), consumer="", share=None, tick_s=0.01, in_flight=lambda: taken)
        recovery = asyncio.create_task(progress.recover())
        assembled = 0
        while not recovery.done():
            await asyncio.sleep(0.02)
            progress.moved = True  # as if traces were handed out
            await progress.store_mark()
            # recovery lists its next batch once the last is assembled: it listed everything only
            # when all four are (its task ends a little later, storing the mark of its own)
            if await store.read(assembled_marks):
                assert assembled == 4, "a mark was stored before recovery listed everything"
            taken = buffer.pop_complete()  # "assemble" what recovery tracked
            if taken:
                await store.record_assembly([assembly_record(t.trace_id) for t in taken])
                assembled += len(taken)
                taken.clear()
        await recovery
        assert assembled == 4
        assert "" in await store.read(assembled_marks)  # stored once the listing was done
    finally:
        await store.stop()


async def test_a_restarted_idle_feed_writes_no_mark(tmp_path):
    store = DuckDBStore(tmp_path / "p.duckdb")
    await store.start()
    try:
        before = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        await store.set_assembled_through(before, "")
        progress = Progress(store, TraceBuffer(), Metrics(), consumer="", share=None, tick_s=0.01, in_flight=lambda: ())
        await progress.recover()  # nothing to recover, a mark of its own: nothing to write
        assert await store.read(assembled_marks) == {"": before.isoformat()}
        progress.moved = True  # once traces move, the mark follows them
        await progress.store_mark()
        assert await store.read(assembled_marks) != {"": before.isoformat()}
    finally:
        await store.stop()
