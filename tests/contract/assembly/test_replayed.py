"""A trace the feed replays after a restart (real DuckDB store, real segment log): assembled before
the stop from the same records, it is not assembled nor scored again; with a record more, it is."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

from support.db import fetch
from support.logged import Logged
from support.spans import agent_root

from tracescorer.model import AgentRun, Span
from tracescorer.store.duckdb import DuckDBStore


class _Told:
    def __init__(self) -> None:
        self.runs: list[AgentRun] = []

    def on_runs(self, runs: Sequence[AgentRun]) -> None:
        self.runs += runs


async def _life(
    logged: Logged, store: DuckDBStore, spans: list[Span], *, replayed: bool, offset: int | None = None
) -> list[AgentRun]:
    """One daemon's life: a new stage (nothing remembered) is handed ``spans`` (appended to the log,
    or replayed from the record at ``offset``) and assembles them."""
    stage = logged.stage(store, store)
    told = _Told()
    stage.add_listener(told)
    if offset is None:
        await logged.hand(stage, spans, replayed=replayed)
    else:
        stage.on_committed(spans, [], (0.0, 0.0), replayed=replayed, span_offsets=[offset] * len(spans))
    stage.on_replayed()  # the feed passed what was acknowledged before this life
    await asyncio.sleep(0.05)  # idle
    assert await stage.flush() == 1
    return told.runs


async def test_a_replayed_trace_is_assembled_again_only_with_more_items(tmp_path):
    store = DuckDBStore(tmp_path / "r.duckdb")
    await store.start()
    try:
        async with Logged(tmp_path / "log") as logged:
            root = agent_root(0)
            chat = dataclasses.replace(
                root,
                span_id=f"{99:016x}",
                parent_span_id=root.span_id,
                name="chat m",
                attributes={"gen_ai.operation.name": "chat"},
            )
            [run] = await _life(logged, store, [root, chat], replayed=False)
            written = "SELECT count(*) FROM runs WHERE updated_at <> created_at"
            # the same record replayed after a kill: its trace was assembled from it
            first = logged.log.start_offset
            assert await _life(logged, store, [root, chat], replayed=True, offset=first) == []
            assert await fetch(store, written) == [(0,)]
            # replayed with a record the first assembly did not read: assembled whole again
            tool = dataclasses.replace(
                chat, span_id=f"{98:016x}", name="execute_tool t", attributes={"gen_ai.operation.name": "execute_tool"}
            )
            [again] = await _life(logged, store, [tool], replayed=True)
            assert again.run_id == run.run_id
            assert await fetch(store, "SELECT span_count FROM assembled_traces") == [(3,)]
    finally:
        await store.stop()


async def test_a_replayed_trace_waits_for_its_root_until_the_replay_is_over(tmp_path):
    """Its model calls replayed first, its agent span further on in the log: one whole run, never
    the model calls' runs of the part (an idle pause in the replay is not the end of the trace)."""
    store = DuckDBStore(tmp_path / "r.duckdb")
    await store.start()
    try:
        async with Logged(tmp_path / "log") as logged:
            stage = logged.stage(store, store)
            told = _Told()
            stage.add_listener(told)
            root = agent_root(1)
            chats = [
                dataclasses.replace(
                    root,
                    span_id=f"{90 + i:016x}",
                    parent_span_id=root.span_id,
                    name="chat m",
                    attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
                )
                for i in range(2)
            ]
            await logged.hand(stage, chats, replayed=True)
            await asyncio.sleep(0.05)  # idle, the replay paused (a gate held the feed)
            assert await stage.flush() == 0
            await logged.hand(stage, [root], replayed=True)
            stage.on_replayed()
            await asyncio.sleep(0.05)
            assert await stage.flush() == 1
            assert [r.span_id for r in told.runs] == [root.span_id]
            assert await fetch(store, "SELECT span_id FROM runs") == [(root.span_id,)]

            # once the replay is over, a replayed trace that never gets its root is assembled when idle
            orphan = dataclasses.replace(chats[0], trace_id=f"{7:032x}", span_id=f"{80:016x}")
            await logged.hand(stage, [orphan], replayed=True)
            stage.on_replayed()
            await asyncio.sleep(0.05)
            assert await stage.flush() == 1
            assert [r.span_id for r in told.runs][-1] == orphan.span_id
    finally:
        await store.stop()


async def test_a_full_buffer_takes_replayed_traces_without_their_root(tmp_path):
    """The feed is held while the buffer is full: rootless replayed traces are assembled as they are
    (and whole again if their root comes), never waited for while the replay cannot go on."""
    store = DuckDBStore(tmp_path / "r.duckdb")
    await store.start()
    try:
        async with Logged(tmp_path / "log") as logged:
            stage = logged.stage(store, store, max_traces=2)
            chats = [
                dataclasses.replace(
                    agent_root(i),
                    span_id=f"{60 + i:016x}",
                    parent_span_id=f"{50 + i:016x}",
                    name="chat m",
                    attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
                )
                for i in range(2)
            ]
            for chat in chats:
                await logged.hand(stage, [chat], replayed=True)
            assert stage.backlog() is not None  # the feed's gate holds it
            await asyncio.sleep(0.05)
            assert await stage.flush() == 2
            assert stage.backlog() is None
    finally:
        await store.stop()
