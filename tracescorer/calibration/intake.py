"""The feed's side of other tools' evaluations: take them out of each request, store them.

:class:`EvaluationIntake` is the :class:`~tracescorer.feed.stage.LogFeed`'s prefilter: for every
request read back from the segment log it runs :func:`~tracescorer.calibration.external.split`
(:meth:`~EvaluationIntake.take`, in the feed's decode thread) and writes the evaluations found to
the :class:`~tracescorer.store.api.EvaluationStore` before the batch's span rows
(:meth:`~EvaluationIntake.store`); a store error is retried by the feed like its rows, and an
evaluation written again after a crash is upserted by its id. The request was acknowledged once
it was in the segment log, as every request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from tracescorer.calibration.external import split
from tracescorer.metrics import Metrics
from tracescorer.model import LogRecord, Span
from tracescorer.records.labels import EvaluationRecord
from tracescorer.store.api import EvaluationStore

log = logging.getLogger(__name__)


class EvaluationIntake:
    """Prefilter of the ingest path (runs on the event loop; one store write per request that
    carries evaluations, none otherwise)."""

    def __init__(self, store: EvaluationStore, metrics: Metrics) -> None:
        self._store = store
        self._metrics = metrics
        self._warned_invalid = False
        self.on_evaluations: list[Callable[[], None]] = []

    def take(
        self, spans: Sequence[Span], logs: Sequence[LogRecord]
    ) -> tuple[Sequence[Span], Sequence[LogRecord], list[EvaluationRecord]]:
        """The telemetry left to store and the evaluations found (pure but for the counters)."""
        found = split(spans, logs)
        m = self._metrics
        if found.own:
            m.child(m.external_evaluations, "own").inc(found.own)
        if found.invalid:
            m.child(m.external_evaluations, "invalid").inc(found.invalid)
            if not self._warned_invalid:
                self._warned_invalid = True
                log.warning(
                    "gen_ai.evaluation.result events without gen_ai.evaluation.name were dropped "
                    '(tracescorer_external_evaluations_total{result="invalid"} counts them; warned once)'
                )
        return found.spans, found.logs, found.evaluations

    def leave(self, spans: Sequence[Span], logs: Sequence[LogRecord]) -> tuple[Sequence[Span], Sequence[LogRecord]]:
        """The telemetry :meth:`take` leaves (for items read back from the log again)."""
        found = split(spans, logs)
        return found.spans, found.logs

    async def store(self, taken: Sequence[EvaluationRecord]) -> None:
        """Write the evaluations :meth:`take` found (upserted by id: a replay writes them again)."""
        if not taken:
            return
        await self._store.write_evaluations(taken)
        self._metrics.child(self._metrics.external_evaluations, "stored").inc(len(taken))
        for callback in self.on_evaluations:
            callback()
