"""Agreement as Prometheus gauges: every judge with human labels, per version, against the labels.

:class:`AgreementGauges` recomputes ``tracescorer_agreement_*`` (pairs, kappa, accuracy, MAE,
Spearman; no intervals: a scrape wants the current figure) every ``interval_s``, and a few seconds
after labels or external evaluations were stored. The rows are the store's typed reads
(:mod:`tracescorer.calibration.sources`: the judge's verdicts on its labelled targets and the labels,
paired in SQL, every row however many), on the store's readers; the arithmetic runs in a worker
thread, so the loop never computes agreement itself. Series of judges or versions that no longer
have labels are removed.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Sequence

from tracescorer.aio import cancel
from tracescorer.calibration import agreement, sources
from tracescorer.metrics import Metrics
from tracescorer.store.api import ReadStore

log = logging.getLogger(__name__)

INTERVAL_S = 60.0
SOON_S = 2.0  # after labels or evaluations arrived: recompute this soon (once for a burst)
MAX_JUDGES = 50  # judges with labels given gauges (bounded series)
_Labels = tuple[str, str, str]


def _value(x: float | None) -> float:
    return math.nan if x is None else float(x)


class AgreementGauges:
    """A daemon component (start / stop(deadline)); :meth:`poke` asks for a recomputation soon."""

    def __init__(
        self, reads: ReadStore, metrics: Metrics, *, interval_s: float = INTERVAL_S, soon_s: float = SOON_S
    ) -> None:
        self._reads = reads
        self._metrics = metrics
        self._interval_s = interval_s
        self._soon_s = soon_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._series: set[_Labels] = set()
        self.computed = 0  # passes done (tests and logs)

    def poke(self) -> None:
        """Labels or evaluations were stored: recompute within ``soon_s``."""
        self._wake.set()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="agreement-gauges")

    async def stop(self, deadline: float) -> bool:
        await cancel([self._task])
        self._task = None
        return True

    async def _run(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception:  # the gauges are best effort: the next pass tries again
                log.exception("computing the agreement gauges failed")
            try:
                await asyncio.wait_for(self._wake.wait(), self._interval_s)
                await asyncio.sleep(self._soon_s)  # a burst of labels: one pass after it
            except TimeoutError:
                pass
            self._wake.clear()

    async def refresh(self) -> None:
        """One pass: read labels and verdicts, compute, set the gauges."""
        rows: list[agreement.Agreement] = []
        judges = [j for j in await sources.labelled_ids(self._reads) if j.strip()][:MAX_JUDGES]
        for judge_id in judges:
            judge, _, pairs = await sources.load_pairs(self._reads, sources.parse_judge(judge_id), None, None)
            if pairs:
                rows += await asyncio.to_thread(
                    agreement.by_version, pairs, judge=str(judge), reference=sources.LABELS, intervals=False
                )
        self._publish(rows)
        self.computed += 1

    def _publish(self, rows: Sequence[agreement.Agreement]) -> None:
        m = self._metrics
        gauges = (m.agreement_pairs, m.agreement_kappa, m.agreement_accuracy, m.agreement_mae, m.agreement_spearman)
        current: set[_Labels] = set()
        for a in rows:
            labels = (a.judge, a.version, a.reference)
            current.add(labels)
            m.agreement_pairs.labels(*labels).set(a.pairs)
            m.agreement_kappa.labels(*labels).set(_value(a.kappa))
            m.agreement_accuracy.labels(*labels).set(_value(a.accuracy))
            m.agreement_mae.labels(*labels).set(_value(a.mae))
            m.agreement_spearman.labels(*labels).set(_value(a.spearman))
        for stale in self._series - current:
            for gauge in gauges:
                try:
                    gauge.remove(*stale)
                except KeyError:
                    pass
        self._series = current
        m.agreement_updated.set(time.time())
