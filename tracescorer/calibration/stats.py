"""Agreement statistics between a judge and a reference (human labels or another evaluator): pure,
exact, dependency-free.

Pairs are ``(judge, reference)``. For categorical verdicts: accuracy, Cohen's kappa, the
confusion matrix, precision and recall of one category (``fail``: the judge's "fail" is the
prediction, the reference's "fail" the truth). For numbers: mean absolute error and Spearman's
rho (average ranks for ties, the Pearson correlation of the ranks). For a judge's numbers against
a reference's pass/fail: the threshold that agrees best. Confidence intervals come from a
percentile bootstrap with a seeded generator, so the same pairs give the same interval every time.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
C = TypeVar("C", bound=Hashable)

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 20240917
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class Interval:
    """A bootstrap confidence interval (``confidence``: 0.95 for a 95% interval)."""

    low: float
    high: float
    confidence: float = DEFAULT_CONFIDENCE


def accuracy(pairs: Sequence[tuple[C, C]]) -> float | None:
    """The share of pairs where judge and reference agree (None without pairs)."""
    return sum(1 for a, b in pairs if a == b) / len(pairs) if pairs else None


def confusion(pairs: Sequence[tuple[C, C]], categories: Sequence[C] | None = None) -> dict[C, dict[C, int]]:
    """``matrix[reference][judge]`` counts; every category seen (or given) is a row and a column."""
    cats = list(categories) if categories is not None else categories_of(pairs)
    matrix: dict[C, dict[C, int]] = {r: dict.fromkeys(cats, 0) for r in cats}
    for judge, reference in pairs:
        matrix.setdefault(reference, dict.fromkeys(cats, 0))
        matrix[reference][judge] = matrix[reference].get(judge, 0) + 1
    return matrix


def categories_of(pairs: Sequence[tuple[C, C]]) -> list[C]:
    """Every category in the pairs, sorted by its text."""
    return sorted({c for pair in pairs for c in pair}, key=str)


def cohen_kappa(pairs: Sequence[tuple[C, C]]) -> float | None:
    """Cohen's kappa: agreement beyond what the two raters' category rates give by chance.

    1 when the observed agreement is perfect; None when it is undefined (no pairs, or both raters
    always chose the same single category, so chance agreement is 1).
    """
    n = len(pairs)
    if not n:
        return None
    judge: dict[C, int] = {}
    reference: dict[C, int] = {}
    agree = 0
    for a, b in pairs:
        judge[a] = judge.get(a, 0) + 1
        reference[b] = reference.get(b, 0) + 1
        agree += a == b
    observed = agree / n
    expected = sum(judge[c] * reference.get(c, 0) for c in judge) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def precision_recall(pairs: Sequence[tuple[C, C]], positive: C) -> tuple[float | None, float | None]:
    """Precision and recall of ``positive`` with the judge as the prediction and the reference as
    the truth (None where the denominator is 0)."""
    tp = sum(1 for a, b in pairs if a == positive and b == positive)
    predicted = sum(1 for a, _ in pairs if a == positive)
    actual = sum(1 for _, b in pairs if b == positive)
    return (tp / predicted if predicted else None, tp / actual if actual else None)


def mean_absolute_error(pairs: Sequence[tuple[float, float]]) -> float | None:
    return sum(abs(a - b) for a, b in pairs) / len(pairs) if pairs else None


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties given the average of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        rank = (i + j) / 2 + 1
        for k in range(i, j + 1):
            out[order[k]] = rank
        i = j + 1
    return out


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r (None with fewer than two pairs or a constant side)."""
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def spearman(pairs: Sequence[tuple[float, float]]) -> float | None:
    """Spearman's rho with ties: Pearson's r of the average ranks (None when undefined)."""
    if len(pairs) < 2:
        return None
    return pearson(ranks([a for a, _ in pairs]), ranks([b for _, b in pairs]))


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of sorted values, interpolated linearly between neighbours."""
    if not sorted_values:
        raise ValueError("no values")
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def bootstrap(
    pairs: Sequence[T],
    statistic: Callable[[Sequence[T]], float | None],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Interval | None:
    """Percentile bootstrap interval of ``statistic`` over ``pairs`` resampled with replacement
    (``random.Random(seed)``: the same pairs give the same interval). Resamples on which the
    statistic is undefined are left out; None when fewer than half of them are left, or with
    fewer than two pairs."""
    n = len(pairs)
    if n < 2 or resamples < 1:
        return None
    rng = random.Random(seed)
    values = []
    for _ in range(resamples):
        value = statistic([pairs[rng.randrange(n)] for _ in range(n)])
        if value is not None and not math.isnan(value):
            values.append(value)
    if len(values) * 2 < resamples:
        return None
    values.sort()
    tail = (1.0 - confidence) / 2
    return Interval(percentile(values, tail), percentile(values, 1.0 - tail), confidence)


@dataclass(frozen=True, slots=True)
class Threshold:
    """The score threshold (``pass`` when score >= it) that agrees best with the reference."""

    value: float
    kappa: float | None
    accuracy: float
    interval: Interval | None = None


def best_threshold(
    pairs: Sequence[tuple[float, Any]], *, passed: Any = "pass", failed: Any = "fail"
) -> Threshold | None:
    """The threshold maximising Cohen's kappa of ``score >= t`` against the reference (accuracy
    where kappa is undefined, then accuracy to break ties), among the observed scores; the lowest
    such score when several agree equally. None without pairs.

    One sweep over the sorted scores (a reference other than ``passed``/``failed`` always
    disagrees), so a bootstrap of it stays cheap.
    """
    n = len(pairs)
    if not n:
        return None
    ordered = sorted(pairs, key=lambda p: p[0])
    ref_pass = sum(1 for _, r in ordered if r == passed)
    ref_fail = sum(1 for _, r in ordered if r == failed)
    below_fail = below_pass = 0  # references of the scores under the threshold
    best: tuple[float, float, float] | None = None  # (kappa or -inf, accuracy, -t)
    chosen: Threshold | None = None
    i = 0
    while i < n:
        t = ordered[i][0]
        judged_pass = n - i  # every score from here on is >= t
        agree = (ref_pass - below_pass) + below_fail
        acc = agree / n
        expected = (judged_pass * ref_pass + i * ref_fail) / (n * n)
        kappa = None if expected >= 1.0 else (acc - expected) / (1.0 - expected)
        key = (kappa if kappa is not None else -math.inf, acc, -t)
        if best is None or key > best:
            best, chosen = key, Threshold(value=t, kappa=kappa, accuracy=acc)
        while i < n and ordered[i][0] == t:  # move the scores equal to t under the next threshold
            below_pass += ordered[i][1] == passed
            below_fail += ordered[i][1] == failed
            i += 1
    return chosen


def threshold_with_interval(
    pairs: Sequence[tuple[float, Any]],
    *,
    passed: Any = "pass",
    failed: Any = "fail",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Threshold | None:
    """:func:`best_threshold` with a bootstrap interval of where the best threshold falls."""
    found = best_threshold(pairs, passed=passed, failed=failed)
    if found is None:
        return None

    def value(sample: Sequence[tuple[float, Any]]) -> float | None:
        t = best_threshold(sample, passed=passed, failed=failed)
        return t.value if t is not None else None

    interval = bootstrap(pairs, value, resamples=resamples, seed=seed, confidence=confidence)
    return Threshold(value=found.value, kappa=found.kappa, accuracy=found.accuracy, interval=interval)
