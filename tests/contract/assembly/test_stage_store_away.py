"""While the store is away (its process restarting after a crash, or after DuckDB invalidated a
database), assembly loses no trace: what it could not write is tracked again (read back from the
segment log) and assembled once the store is back."""

from __future__ import annotations

import asyncio
from typing import Any

from support.db import scalar
from support.logged import Logged
from support.spans import agent_root

from tracescorer.store.api import StoreClosed
from tracescorer.store.duckdb import DuckDBStore

# what assembly asks of the store during a pass
_PASS_CALLS = ("assembled_before", "upsert_runs", "record_assembly")


class _Away:
    """The real store, refusing assembly's calls as a restarting one does while ``away`` is set."""

    def __init__(self, store: DuckDBStore) -> None:
        self._store = store
        self.away = False
        self.refused: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name not in _PASS_CALLS:
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.away:
                self.refused.append(name)
                raise StoreClosed("store is not open")
            return await attr(*args, **kwargs)

        return call


async def test_traces_met_by_a_store_that_is_away_are_assembled_once_it_is_back(tmp_path, logged: Logged):
    real = DuckDBStore(tmp_path / "ts.duckdb")
    await real.start()
    try:
        store = _Away(real)
        stage = logged.stage(store, store)
        spans = [agent_root(i) for i in range(3)]
        await logged.hand(stage, spans)
        await asyncio.sleep(0.05)  # past idle_s: every trace is complete

        store.away = True
        await stage.flush()  # their runs cannot be written: tracked again, to be read back
        assert "upsert_runs" in store.refused and len(stage.buffer) == 3
        await stage.flush()  # read back from the segment log (no store needed), refused again: still tracked
        assert store.refused[-1] in ("upsert_runs", "record_assembly") and len(stage.buffer) == 3
        assert await scalar(real, "SELECT count(*) FROM runs") == 0

        store.away = False
        assert await stage.flush() == 3
        assert await scalar(real, "SELECT count(*) FROM runs") == 3
        assert len(stage.buffer) == 0
    finally:
        await real.stop()
