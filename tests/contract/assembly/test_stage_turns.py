"""The assembly stage shares the event loop with the receivers: a pass over many complete traces
lets other callbacks (acknowledgements) run between small slices of extraction."""

from __future__ import annotations

import asyncio

from support.db import scalar
from support.logged import Logged
from support.spans import agent_root

from tracescorer.assembly.stage import SLICE
from tracescorer.metrics import Metrics
from tracescorer.store.duckdb import DuckDBStore


async def test_a_pass_over_many_traces_yields_between_slices(tmp_path, logged: Logged):
    store = DuckDBStore(tmp_path / "ts.duckdb")
    await store.start()
    try:
        metrics = Metrics()
        stage = logged.stage(store, store, metrics)
        n = 4 * SLICE
        spans = [agent_root(i) for i in range(n)]
        await logged.hand(stage, spans)  # the receiver's path: logged, then handed to assembly
        await asyncio.sleep(0.05)  # past idle_s: every trace is complete

        def extracted() -> float:
            return metrics.registry.get_sample_value("tracescorer_assembly_extract_seconds_count") or 0.0

        seen: list[float] = []
        flushing = asyncio.create_task(stage.flush())
        asyncio.get_running_loop().call_soon(lambda: seen.append(extracted()))
        assert await flushing == n
        assert extracted() == n
        assert seen and 0 < seen[0] < n  # a waiting callback ran after the first slice, not after all
        assert await scalar(store, "SELECT count(*) FROM runs") == n  # and every trace's run was stored
    finally:
        await store.stop()
