"""The receivers' side of other tools' evaluations: take them out of each request, store them.

:class:`EvaluationIntake` is handed to the :class:`~tracescorer.receiver.ingest.Ingestor` as its
prefilter: for every decoded request it runs :func:`~tracescorer.calibration.external.split`,
writes the evaluations found to the :class:`~tracescorer.store.api.EvaluationStore` and hands the
rest of the telemetry on to the span log. The write is awaited, so the request is acknowledged
only once its evaluations are committed too (a store error refuses the request as retryable; an
evaluation sent again is upserted by its id).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from tracescorer.calibration.external import split
from tracescorer.metrics import Metrics
from tracescorer.model import LogRecord, Span
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

    async def __call__(
        self, spans: Sequence[Span], logs: Sequence[LogRecord]
    ) -> tuple[Sequence[Span], Sequence[LogRecord]]:
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
        if found.evaluations:
            await self._store.write_evaluations(found.evaluations)
            m.child(m.external_evaluations, "stored").inc(len(found.evaluations))
            for callback in self.on_evaluations:
                callback()
        return found.spans, found.logs
