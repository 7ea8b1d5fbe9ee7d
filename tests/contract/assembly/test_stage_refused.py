"""One bad trace does not hold its chunk back: runs the store refuses as data (not a store that
is away) are found by halves, and a trace whose extraction raises is taken alone; either is
recorded as assembled without runs, with the reason; the others are stored and scored, and
nothing is retried for good."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

from support.db import fetch, scalar
from support.logged import Logged
from support.spans import agent_root

from tracescorer.metrics import Metrics
from tracescorer.model import AgentRun
from tracescorer.receiver.encode import encode_traces
from tracescorer.seglog import TRACES
from tracescorer.store.api import DataError
from tracescorer.store.duckdb import DuckDBStore


class _Refusing:
    """The real store, refusing every write of runs that includes one of the ``poison`` traces, as
    it refuses values its columns cannot hold."""

    def __init__(self, store: DuckDBStore, poison: set[str]) -> None:
        self._store = store
        self.poison = poison
        self.refusals = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def upsert_runs(self, runs: Sequence[AgentRun], **kwargs: Any) -> Any:
        if any(r.trace_id in self.poison for r in runs):
            self.refusals += 1
            raise DataError("cannot store: value out of range")
        return await self._store.upsert_runs(runs, **kwargs)


class _Heard:
    def __init__(self) -> None:
        self.traces: list[str] = []

    def on_runs(self, runs: Sequence[AgentRun]) -> None:
        self.traces += [r.trace_id for r in runs]


async def test_a_refused_trace_is_recorded_with_its_reason_and_the_rest_of_its_chunk_is_stored(
    tmp_path, logged: Logged
):
    real = DuckDBStore(tmp_path / "ts.duckdb")
    await real.start()
    try:
        spans = [agent_root(i) for i in range(40)]
        poison = {spans[7].trace_id, spans[30].trace_id}
        store = _Refusing(real, poison)
        metrics = Metrics()
        stage = logged.stage(store, store, metrics)
        heard = _Heard()
        stage.add_listener(heard)
        await logged.hand(stage, spans)
        await asyncio.sleep(0.05)  # past idle_s: every trace is complete

        assert await stage.flush() == 40
        stored = {row[0] for row in await fetch(real, "SELECT trace_id FROM runs")}
        assert stored == {s.trace_id for s in spans} - poison
        assert sorted(heard.traces) == sorted(stored)  # scoring hears of the stored runs only
        refused = await fetch(
            real,
            "SELECT trace_id, run_count, unmatched_reason FROM assembled_traces "
            "WHERE unmatched_reason IS NOT NULL ORDER BY trace_id",
        )
        assert [(tid, n) for tid, n, _ in refused] == sorted((tid, 0) for tid in poison)
        assert all("runs not stored" in reason and "out of range" in reason for _, _, reason in refused)
        assert await scalar(real, "SELECT count(*) FROM assembled_traces") == 40
        assert metrics.registry.get_sample_value("tracescorer_assembly_traces_refused_total") == 2

        # nothing is tracked again: the next passes do not retry the refused traces
        refusals = store.refusals
        assert len(stage.buffer) == 0
        assert await stage.flush() == 0 and store.refusals == refusals
    finally:
        await real.stop()


async def test_a_trace_whose_extraction_raises_is_recorded_and_the_rest_of_its_chunk_is_stored(
    tmp_path, logged: Logged
):
    real = DuckDBStore(tmp_path / "ts.duckdb")
    await real.start()
    try:
        spans = [agent_root(i) for i in range(5)]
        # what only a bug lets through decoding: extraction meets a value it cannot read
        broken = dataclasses.replace(agent_root(9), attributes=None)  # type: ignore[arg-type]
        stage = logged.stage(real, real)
        offset = await logged.log.append(TRACES, encode_traces(spans))
        stage.on_committed([*spans, broken], [], (0.0, 0.0), span_offsets=[offset] * 6)
        await asyncio.sleep(0.05)  # past idle_s: every trace is complete

        assert await stage.flush() == 6
        stored = {row[0] for row in await fetch(real, "SELECT trace_id FROM runs")}
        assert stored == {s.trace_id for s in spans}
        reason = await scalar(real, "SELECT unmatched_reason FROM assembled_traces WHERE trace_id = ?", broken.trace_id)
        assert reason.startswith("extraction failed: TypeError")
        assert len(stage.buffer) == 0
    finally:
        await real.stop()
