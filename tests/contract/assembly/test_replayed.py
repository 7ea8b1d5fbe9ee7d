"""A trace the feed replays after a restart (real DuckDB store, span rows): assembled before the
stop from the same items, it is not assembled nor scored again; with an item more, it is."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

from support.db import fetch
from support.spans import agent_root

from tracescorer.assembly.stage import AssemblyStage
from tracescorer.config import AssemblySettings
from tracescorer.metrics import Metrics
from tracescorer.model import AgentRun, Span
from tracescorer.store.duckdb import DuckDBStore


class _Told:
    def __init__(self) -> None:
        self.runs: list[AgentRun] = []

    def on_runs(self, runs: Sequence[AgentRun]) -> None:
        self.runs += runs


async def _life(store: DuckDBStore, spans: list[Span], *, replayed: bool) -> list[AgentRun]:
    """One daemon's life: a new stage (nothing remembered) is handed ``spans`` and assembles them."""
    outcome = await store.append(spans)
    stage = AssemblyStage(AssemblySettings(idle_s=0.01), store, store, Metrics())
    told = _Told()
    stage.add_listener(told)
    stage.on_committed(spans, [], (outcome.received_from, outcome.received_to), replayed=replayed)
    await asyncio.sleep(0.05)  # idle
    assert await stage.flush() == 1
    return told.runs


async def test_a_replayed_trace_is_assembled_again_only_with_more_items(tmp_path):
    store = DuckDBStore(tmp_path / "r.duckdb")
    await store.start()
    try:
        root = agent_root(0)
        chat = dataclasses.replace(
            root,
            span_id=f"{99:016x}",
            parent_span_id=root.span_id,
            name="chat m",
            attributes={"gen_ai.operation.name": "chat"},
        )
        [run] = await _life(store, [root, chat], replayed=False)
        written = "SELECT count(*) FROM runs WHERE updated_at <> created_at"
        # the same items replayed after a kill (their rows stored once: a retry's copy is one span)
        assert await _life(store, [root, chat], replayed=True) == []
        assert await fetch(store, written) == [(0,)]
        # replayed with an item the first assembly did not have: assembled whole again, scored again
        tool = dataclasses.replace(
            chat, span_id=f"{98:016x}", name="execute_tool t", attributes={"gen_ai.operation.name": "execute_tool"}
        )
        [again] = await _life(store, [tool], replayed=True)
        assert again.run_id == run.run_id
        assert await fetch(store, "SELECT span_count FROM assembled_traces") == [(3,)]
    finally:
        await store.stop()
