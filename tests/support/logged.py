"""Assembly in the test's process over a real segment log: spans are appended as OTLP requests
(as the receivers append them) and handed to a stage with the offsets of their records, as the
feed hands them; the stage reads traces back from those records."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracescorer.assembly.sources import SegmentLogSource
from tracescorer.assembly.stage import AssemblyStage
from tracescorer.config import AssemblySettings
from tracescorer.feed.readback import LogTraces
from tracescorer.metrics import Metrics
from tracescorer.model import Span
from tracescorer.receiver.encode import encode_traces
from tracescorer.seglog import TRACES, SegmentLog


class Logged:
    """A segment log in ``directory`` (started by ``async with``)."""

    def __init__(self, directory: Path) -> None:
        self.log = SegmentLog(directory, sync=False, min_free_bytes=0)

    async def __aenter__(self) -> Logged:
        await self.log.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.log.stop(0.0)

    def stage(self, span_log: Any, runs: Any, metrics: Metrics | None = None, **settings: Any) -> AssemblyStage:
        """A new assembly stage (nothing remembered: a new daemon's) reading back from this log."""
        metrics = metrics or Metrics()
        source = SegmentLogSource(span_log, LogTraces(self.log), metrics)
        return AssemblyStage(AssemblySettings(**{"idle_s": 0.01, **settings}), span_log, runs, metrics, source)

    async def hand(self, stage: AssemblyStage, spans: Sequence[Span], *, replayed: bool = False) -> None:
        """Append ``spans`` as one request and hand them to ``stage`` as the feed does."""
        offset = await self.log.append(TRACES, encode_traces(spans))
        stage.on_committed(spans, [], (0.0, 0.0), replayed=replayed, span_offsets=[offset] * len(spans))
