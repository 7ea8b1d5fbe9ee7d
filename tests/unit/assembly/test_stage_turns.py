"""The assembly stage shares the event loop with the receivers: a pass over many complete traces
lets other callbacks (acknowledgements) run between small slices of extraction."""

from __future__ import annotations

import asyncio

from support.db import scalar
from tracescorer.assembly.stage import SLICE, AssemblyStage
from tracescorer.config import AssemblySettings
from tracescorer.metrics import Metrics
from tracescorer.model import Span
from tracescorer.store.duckdb import DuckDBStore


def _root(i: int) -> Span:
    return Span(trace_id=f"{i + 1:032x}", span_id=f"{i + 1:016x}", parent_span_id=None, name="invoke_agent support",
                kind="internal", start_time_unix_nano=1_000 + i, end_time_unix_nano=2_000 + i,
                attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"})


async def test_a_pass_over_many_traces_yields_between_slices(tmp_path):
    store = DuckDBStore(tmp_path / "ts.duckdb")
    await store.open()
    try:
        metrics = Metrics()
        stage = AssemblyStage(AssemblySettings(idle_s=0.01), store, metrics)
        n = 4 * SLICE
        spans = [_root(i) for i in range(n)]
        outcome = await store.append(spans)  # the receiver's path: commit, then hand to assembly
        stage.on_committed(spans, [], (outcome.received_from, outcome.received_to))
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
        await store.close()
