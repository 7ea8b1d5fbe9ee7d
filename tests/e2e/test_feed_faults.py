"""A batch the feed fails to handle (a bug) is logged, counted, makes /readyz say so while it
lasts, and is tried again from what the store holds: no row twice, none lost, the feed goes on."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from support.daemon import plain_settings, running_app, settled
from support.db import scalar
from support.otlp import span_exporter, tracer

from tracescorer.model import LogRecord, Span


class _FailsOnce:
    """The feed's prefilter, failing on the first batch it sees."""

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


def _send(port: int, n: int) -> None:
    with tracer(span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{port}"), service="checkout") as t:
        for i in range(n):
            with t.start_as_current_span(f"GET /item/{i}"):
                pass


async def test_a_failed_batch_is_tried_again_and_stored_once(tmp_path):
    async with running_app(plain_settings(tmp_path, workers={"count": 0})) as app:  # a fault in this process's feed
        faulty = _FailsOnce(app.feed._prefilter)
        app.feed._prefilter = faulty  # fault injection at the feed's one plug-in point
        await asyncio.to_thread(_send, app.grpc_port, 20)
        queries = await settled(app)
        assert faulty.failed == 1
        assert await scalar(queries, "SELECT count(*) FROM spans") == 20
        assert await scalar(queries, "SELECT count(DISTINCT span_id) FROM spans") == 20
        assert app.feed.failure is None and app.not_ready_reason() is None
        samples = {s.name: s.value for f in app.metrics.registry.collect() for s in f.samples}
        assert samples["tracescorer_feed_failures_total"] == 1
