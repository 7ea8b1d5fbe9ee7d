"""A batch a feed of the segment log fails to handle (a bug) is logged, counted, and tried again
from what the store holds, and the feed goes on: the assembly feed hands every trace to assembly
(each run once), the span-rows feed stores no row twice and loses none."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from support.daemon import app_metric, plain_settings, running_app, settings_for, settled, wait_for_async
from support.db import fetch, scalar
from support.otlp import agent_trace, span_exporter, tracer

from tracescorer.model import LogRecord, Span
from tracescorer.store.api import AppendOutcome, Intake


class _PrefilterFailsOnce:
    """The assembly feed's prefilter, failing on the first batch it sees."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.failed = 0

    def take(self, spans: Sequence[Span], logs: Sequence[LogRecord]) -> Any:
        if not self.failed:
            self.failed += 1
            raise RuntimeError("injected: a bug in a batch")
        return self.inner.take(spans, logs)

    async def store(self, taken: Sequence[Any]) -> None:
        await self.inner.store(taken)


class _IntakeFailsOnce:
    """The span-rows feed's store, failing once right after its first batch was committed."""

    def __init__(self, inner: Intake) -> None:
        self.inner = inner
        self.failed = 0

    async def append(self, *args: Any, **kwargs: Any) -> AppendOutcome:
        outcome = await self.inner.append(*args, **kwargs)
        if not self.failed:
            self.failed += 1
            raise RuntimeError("injected: a bug after a batch was stored")
        return outcome


async def test_a_failed_batch_of_the_assembly_feed_is_tried_again_and_each_run_assembled_once(tmp_path):
    settings = settings_for(tmp_path, workers={"count": 0}, assembly={"idle_s": 0.2})  # this process's feed
    async with running_app(settings) as app:
        faulty = _PrefilterFailsOnce(app.pipeline.feed._prefilter)
        app.pipeline.feed._prefilter = faulty  # fault injection at the feed's one plug-in point
        with tracer(span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{app.grpc_port}")) as t:
            for i in range(5):
                await asyncio.to_thread(agent_trace, t, f"question {i}")
        queries = await settled(app)

        async def runs() -> bool:
            return await scalar(queries, "SELECT count(*) FROM runs") == 5

        await wait_for_async(runs, 30, what="the five runs")
        assert faulty.failed == 1
        assert await scalar(queries, "SELECT count(DISTINCT trace_id) FROM runs") == 5
        # each trace assembled once, whole: the failed batch's items were handed on once, all of them
        assert await fetch(queries, "SELECT span_count, count(*) FROM assembled_traces GROUP BY 1") == [(4, 5)]
        assert await app_metric(app, "tracescorer_assembly_traces_total") == 5
        assert app.pipeline.feed.failure is None and app.not_ready_reason() is None
        assert await app_metric(app, "tracescorer_feed_failures_total") == 1


def _send(port: int, n: int) -> None:
    with tracer(span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{port}"), service="checkout") as t:
        for i in range(n):
            with t.start_as_current_span(f"GET /item/{i}"):
                pass


async def test_a_failed_batch_of_the_span_rows_feed_is_tried_again_and_stored_once(tmp_path):
    async with running_app(plain_settings(tmp_path, workers={"count": 0})) as app:  # this process's feeds
        rows = app.pipeline.rows
        assert rows is not None
        faulty = _IntakeFailsOnce(rows._intake)
        rows._intake = faulty  # fault injection at the feed's store
        await asyncio.to_thread(_send, app.grpc_port, 20)
        queries = await settled(app)
        assert faulty.failed == 1
        assert await scalar(queries, "SELECT count(*) FROM spans") == 20
        assert await scalar(queries, "SELECT count(DISTINCT span_id) FROM spans") == 20
        assert rows.failure is None and app.not_ready_reason() is None
        assert await app_metric(app, "tracescorer_feed_failures_total") == 1
