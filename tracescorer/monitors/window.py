"""A sliding time window of score counts in fixed buckets: bounded memory, O(1) per score.

The window is cut into :data:`BUCKETS` buckets of ``window / BUCKETS`` seconds aligned on the
epoch (bucket ``i`` holds scores stored in ``[i*w, (i+1)*w)``), so the start-up rebuild can
group the stored scores into exactly the buckets the live path would have filled. A bucket
leaves the window once it lies wholly before ``now - window``: the window covers the last
``window`` seconds to within one bucket.

Besides counts, the window keeps a few recent "bad" scores (the examples a notification links
to), chosen by what the monitor watches: failed scores for ``pass_rate``, errors for
``error_rate``, scores on the wrong side of the threshold for ``mean``.

A ``coverage`` window counts live decision rows instead of scores (``Counts.add_decision``): the
value is the share of eligible targets scored, its examples the targets left without a score (the
decision and its detail: which filter clause, which error, which limit).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from tracescorer.config.monitors import MonitorSettings
from tracescorer.records.monitors import Counts, Sample
from tracescorer.records.scores import DecisionRecord, ScoreRecord

BUCKETS = 60
MAX_EXAMPLES = 5


@dataclass(frozen=True, slots=True)
class Reading:
    """An aggregate over the window: ``value`` is None when there is nothing to aggregate."""

    value: float | None
    samples: int


def example_kind(monitor: MonitorSettings) -> str:
    """Which scores are examples of the problem a monitor watches for (see the module doc)."""
    bad_low = monitor.comparison == "below"
    if monitor.aggregate == "pass_rate":
        return "fail" if bad_low else "pass"
    if monitor.aggregate == "error_rate":
        return "error" if not bad_low else "ok"
    if monitor.aggregate == "mean":
        return "below" if bad_low else "above"
    if monitor.aggregate == "coverage":
        return "skipped" if bad_low else "scored"
    return "any" if not bad_low else "none"


def is_example(kind: str, threshold: float, sample: Sample) -> bool:
    if kind == "fail":
        return sample.label == "fail"
    if kind == "pass":
        return sample.label == "pass"
    if kind == "error":
        return sample.status == "error"
    if kind == "ok":
        return sample.status == "ok"
    if kind == "skipped":
        return sample.status not in ("scored", "sampled_out")
    if kind == "scored":
        return sample.status == "scored"
    if kind in ("below", "above"):
        if sample.status != "ok" or sample.score is None:
            return False
        return sample.score < threshold if kind == "below" else sample.score > threshold
    return kind == "any"


@dataclass(slots=True)
class Window:
    """The sliding window of one monitor."""

    monitor: MonitorSettings
    width_s: float = field(init=False, default=0.0)
    buckets: deque[tuple[int, Counts]] = field(default_factory=deque)
    examples: deque[Sample] = field(default_factory=lambda: deque(maxlen=MAX_EXAMPLES))
    kind: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.width_s = self.monitor.window_s / BUCKETS
        self.kind = example_kind(self.monitor)

    def bucket_of(self, at: float) -> int:
        return math.floor(at / self.width_s)

    def add(self, sample: Sample, sample_rate: float | None = None) -> None:
        """A score, or for ``coverage`` a decision (its ``status``) of a binding sampling ``sample_rate``."""
        counts = Counts()
        if self.monitor.aggregate == "coverage":
            counts.add_decision(sample.status, sample_rate)
        else:
            counts.add_sample(sample)
        self.add_counts(self.bucket_of(sample.at), counts)
        if is_example(self.kind, self.monitor.threshold, sample):
            self.add_example(sample)

    def add_example(self, sample: Sample) -> None:
        if self.examples and self.examples[-1].at > sample.at:
            ordered = sorted([*self.examples, sample], key=lambda s: s.at)[-MAX_EXAMPLES:]
            self.examples.clear()
            self.examples.extend(ordered)
        else:
            self.examples.append(sample)

    def add_counts(self, index: int, counts: Counts) -> None:
        """Add to bucket ``index`` (kept in order; a late score goes into its own bucket)."""
        buckets = self.buckets
        if not buckets or buckets[-1][0] < index:
            buckets.append((index, counts))
            while buckets[0][0] < index - BUCKETS:  # bounded even when nobody reads
                buckets.popleft()
            return
        for pos in range(len(buckets) - 1, -1, -1):
            existing, bucket = buckets[pos]
            if existing == index:
                bucket.add(counts)
                return
            if existing < index:
                buckets.insert(pos + 1, (index, counts))
                return
        buckets.appendleft((index, counts))

    def evict(self, now: float) -> None:
        """Drop buckets (and examples) wholly older than ``now - window``."""
        start = now - self.monitor.window_s
        while self.buckets and (self.buckets[0][0] + 1) * self.width_s <= start:
            self.buckets.popleft()
        while self.examples and self.examples[0].at < start:
            self.examples.popleft()

    def totals(self, now: float) -> Counts:
        self.evict(now)
        total = Counts()
        for _, bucket in self.buckets:
            total.add(bucket)
        return total

    def read(self, now: float) -> Reading:
        """The monitor's aggregate over the window at ``now``."""
        t = self.totals(now)
        aggregate = self.monitor.aggregate
        if aggregate == "count":
            return Reading(float(t.n), t.n)
        if aggregate == "mean":
            return Reading(t.score_sum / t.ok if t.ok else None, t.ok)
        if aggregate == "pass_rate":
            labelled = t.passed + t.failed
            return Reading(t.passed / labelled if labelled else None, labelled)
        if aggregate == "coverage":  # eligible is fractional only for filtered_out targets of a sampling binding
            return Reading(t.covered / t.eligible if t.eligible > 0 else None, round(t.eligible))
        return Reading(t.errors / t.n if t.n else None, t.n)

    def recent_examples(self, now: float) -> list[Sample]:
        """The newest examples still inside the window, newest first."""
        self.evict(now)
        return list(reversed(self.examples))


def score_sample(record: ScoreRecord, at: float) -> Sample:
    return Sample(
        at=at,
        score_id=record.id,
        scorer_id=record.scorer_id,
        status=record.status,
        score=record.score,
        label=record.label,
        trace_id=record.trace_id,
        conversation_id=record.conversation_id,
        run_id=record.run_id,
        agent=record.entity_id,
        reason=record.reason or record.error,
    )


def decision_sample(record: DecisionRecord, at: float) -> Sample:
    """A decision row as a coverage window takes it (see :class:`Sample`)."""
    return Sample(
        at=at,
        score_id=record.id,
        scorer_id=record.scorer_id,
        status=record.decision,
        score=None,
        label=None,
        trace_id=record.trace_id,
        conversation_id=record.conversation_id,
        run_id=record.target_id if record.target_type == "run" else None,
        reason=record.detail,
    )
