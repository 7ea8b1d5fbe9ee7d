"""A configuration reload's export sinks (EvaluationExporter.plan / apply), against a real local
OTLP receiver and a real DuckDB file: a sink added starts and delivers what is due, an unchanged
one goes on without sending again, a removed one stops; a section that cannot be built is refused
before anything changes."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.otlp_capture import OtlpCapture
from fakes.scores_db import delivery_states, insert_run, insert_score

from tracescorer.config import ConfigError, ExportSettings
from tracescorer.export import EvaluationExporter
from tracescorer.store.duckdb import DuckDBStore


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[DuckDBStore]:
    db = DuckDBStore(tmp_path / "x.duckdb")
    await db.start()
    yield db
    await db.stop()


@pytest.fixture
def capture() -> Iterator[OtlpCapture]:
    with OtlpCapture() as server:
        yield server


def _export(*sinks: dict[str, Any]) -> ExportSettings:
    return ExportSettings(enabled=bool(sinks), sinks=list(sinks), timeout_s=5.0, interval_s=60.0)


async def test_reloaded_sinks_start_go_on_and_stop(store: DuckDBStore, capture: OtlpCapture) -> None:
    grpc = {"otlp": {"name": "a", "endpoint": capture.grpc_endpoint, "protocol": "grpc"}}
    http = {"otlp": {"name": "b", "endpoint": capture.http_base_url, "protocol": "http/protobuf"}}
    exporter = EvaluationExporter(store, _export())  # export off at start: a reload turns it on
    await exporter.start()
    try:
        run = await insert_run(store)
        first = await insert_score(store, run)
        await exporter.apply(exporter.plan(_export(grpc)))
        assert exporter.sink_ids == ["a"]
        assert await exporter.force_flush(5)
        sink_a = exporter.sink("a")
        assert [e.transport for e in capture.exports] == ["grpc"]

        with pytest.raises(ConfigError, match="duplicate sink name"):
            exporter.plan(_export(grpc, {"otlp": {**http["otlp"], "name": "a"}}))
        assert exporter.sink_ids == ["a"] and exporter.sink("a") is sink_a

        await exporter.apply(exporter.plan(_export(grpc, http)))
        assert exporter.sink_ids == ["a", "b"] and exporter.sink("a") is sink_a  # unchanged: the same sink
        assert await exporter.force_flush(5)
        assert [e.transport for e in capture.exports] == ["grpc", "http"]  # b delivered what was due; a not again
        states = await delivery_states(store)
        assert {sink: s["status"] for (_, sink), s in states.items()} == {"a": "delivered", "b": "delivered"}

        await exporter.apply(exporter.plan(_export(http)))
        assert exporter.sink_ids == ["b"] and exporter.sink("a") is None
        second = await insert_score(store, run, scorer_id="other")
        exporter.notify()
        assert await exporter.force_flush(5)
        assert [e.transport for e in capture.exports] == ["grpc", "http", "http"]
        states = await delivery_states(store)
        assert (second["id"], "a") not in states and states[(second["id"], "b")]["status"] == "delivered"
        assert states[(first["id"], "a")]["status"] == "delivered"
    finally:
        await exporter.stop(time.monotonic() + 5)
