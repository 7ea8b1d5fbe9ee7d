"""Agreement of a judge with a reference, per judge version: pairing rows and computing the figures.

The *judge* is a tracescorer scorer (its ok scores) or another tool's evaluator (its external
evaluations); the *reference* is the human labels given for the judge's id, or another judge.
Rows come from :mod:`tracescorer.store.label_queries` as dicts; everything here is pure.

A target labelled by several people has one reference: the majority label (the most recent
among equals) and the mean of the numbers. Per judge version (``all`` for every version
together) :func:`measure` gives the categorical figures where both sides have a label, the
numeric ones where both have a number, and a suggested threshold where the judge has a number
and the reference says pass or fail.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracescorer.calibration import stats
from tracescorer.records.labels import FAIL, PASS

Key = tuple[str, str]  # (target type, target id)
ALL_VERSIONS = "all"


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """One judge's verdict on one target (a score row or an external evaluation)."""

    target_type: str
    target_id: str
    version: str
    score: float | None
    label: str | None
    threshold: float | None = None
    reason: str | None = None
    trace_id: str | None = None
    run_id: str | None = None
    conversation_id: str | None = None
    agent: str | None = None

    @property
    def key(self) -> Key:
        return (self.target_type, self.target_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reference:
    """What the reference says about one target."""

    label: str | None
    score: float | None
    count: int = 1
    authors: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Pair:
    judge: Verdict
    reference: Reference


@dataclass(frozen=True, slots=True, kw_only=True)
class Agreement:
    """The figures of one judge version against the reference (None where undefined)."""

    judge: str
    reference: str
    version: str
    pairs: int  # targets with a verdict on both sides
    labelled: int = 0  # pairs compared as labels
    accuracy: float | None = None
    accuracy_ci: stats.Interval | None = None
    kappa: float | None = None
    kappa_ci: stats.Interval | None = None
    categories: tuple[str, ...] = ()
    confusion: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # [reference][judge]
    precision_fail: float | None = None
    precision_fail_ci: stats.Interval | None = None
    recall_fail: float | None = None
    recall_fail_ci: stats.Interval | None = None
    numeric: int = 0  # pairs compared as numbers
    mae: float | None = None
    mae_ci: stats.Interval | None = None
    spearman: float | None = None
    spearman_ci: stats.Interval | None = None
    threshold: float | None = None  # the judge's threshold now
    suggested: stats.Threshold | None = None


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def verdicts(rows: Iterable[Mapping[str, Any]]) -> list[Verdict]:
    """Rows of :func:`~tracescorer.store.label_queries.judge_scores` (or ``judge_evaluations``),
    one verdict per target: the latest row wins."""
    latest: dict[Key, Verdict] = {}
    for r in rows:
        if r.get("target_id") is None:
            continue
        v = Verdict(
            target_type=str(r["target_type"]),
            target_id=str(r["target_id"]),
            version=str(r.get("version") or "-"),
            score=_float(r.get("score")),
            label=r.get("label"),
            threshold=_float(r.get("threshold")),
            reason=r.get("reason"),
            trace_id=r.get("trace_id"),
            run_id=r.get("run_id"),
            conversation_id=r.get("conversation_id"),
            agent=r.get("agent"),
        )
        latest[v.key] = v
    return list(latest.values())


def references_from_labels(rows: Iterable[Mapping[str, Any]]) -> dict[Key, Reference]:
    """Rows of :func:`~tracescorer.store.label_queries.labels_for` (oldest first), one reference
    per target: the majority label (the most recent among equals), the mean of the numbers."""
    grouped: dict[Key, list[Mapping[str, Any]]] = {}
    for r in rows:
        grouped.setdefault((str(r["target_type"]), str(r["target_id"])), []).append(r)
    out: dict[Key, Reference] = {}
    for key, items in grouped.items():
        votes: dict[str, tuple[int, int]] = {}  # label -> (count, position of its latest vote)
        for position, r in enumerate(items):
            if r.get("label") is not None:
                count, _ = votes.get(r["label"], (0, 0))
                votes[r["label"]] = (count + 1, position)
        label = max(votes, key=lambda k: votes[k]) if votes else None
        numbers = [float(r["score"]) for r in items if r.get("score") is not None]
        out[key] = Reference(
            label=label,
            score=sum(numbers) / len(numbers) if numbers else None,
            count=len(items),
            authors=tuple(str(r["author"]) for r in items),
            notes=tuple(str(r["note"]) for r in items if r.get("note")),
        )
    return out


def references_from_verdicts(items: Iterable[Verdict]) -> dict[Key, Reference]:
    """Another judge as the reference."""
    return {v.key: Reference(label=v.label, score=v.score) for v in items}


def pair(judged: Sequence[Verdict], references: Mapping[Key, Reference]) -> list[Pair]:
    """The targets both sides gave a verdict on."""
    return [Pair(v, references[v.key]) for v in judged if v.key in references]


def _labels(pairs: Sequence[Pair]) -> list[tuple[str, str]]:
    return [
        (p.judge.label, p.reference.label) for p in pairs if p.judge.label is not None and p.reference.label is not None
    ]


def _numbers(pairs: Sequence[Pair]) -> list[tuple[float, float]]:
    return [
        (p.judge.score, p.reference.score) for p in pairs if p.judge.score is not None and p.reference.score is not None
    ]


def _threshold_pairs(pairs: Sequence[Pair]) -> list[tuple[float, str]]:
    return [
        (p.judge.score, p.reference.label)
        for p in pairs
        if p.judge.score is not None and p.reference.label in (PASS, FAIL)
    ]


def _precision(sample: Sequence[tuple[str, str]]) -> float | None:
    return stats.precision_recall(sample, FAIL)[0]


def _recall(sample: Sequence[tuple[str, str]]) -> float | None:
    return stats.precision_recall(sample, FAIL)[1]


def measure(
    pairs: Sequence[Pair],
    *,
    judge: str,
    reference: str,
    version: str,
    intervals: bool = True,
    resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = stats.DEFAULT_SEED,
) -> Agreement:
    """Every figure for these pairs (bootstrap intervals unless ``intervals`` is False)."""
    labels = _labels(pairs)
    numbers = _numbers(pairs)
    tpairs = _threshold_pairs(pairs)

    def ci(sample: Sequence[Any], statistic: Any) -> stats.Interval | None:
        return stats.bootstrap(sample, statistic, resamples=resamples, seed=seed) if intervals else None

    precision, recall = stats.precision_recall(labels, FAIL)
    binary = set(stats.categories_of(labels)) <= {PASS, FAIL}
    thresholds = {p.judge.threshold for p in pairs if p.judge.threshold is not None}
    suggested = None
    if tpairs:
        suggested = (
            stats.threshold_with_interval(tpairs, resamples=resamples, seed=seed)
            if intervals
            else stats.best_threshold(tpairs)
        )
    return Agreement(
        judge=judge,
        reference=reference,
        version=version,
        pairs=len(pairs),
        labelled=len(labels),
        accuracy=stats.accuracy(labels),
        accuracy_ci=ci(labels, stats.accuracy),
        kappa=stats.cohen_kappa(labels),
        kappa_ci=ci(labels, stats.cohen_kappa),
        categories=tuple(stats.categories_of(labels)),
        confusion=stats.confusion(labels) if labels else {},
        precision_fail=precision if binary else None,
        precision_fail_ci=ci(labels, _precision) if binary else None,
        recall_fail=recall if binary else None,
        recall_fail_ci=ci(labels, _recall) if binary else None,
        numeric=len(numbers),
        mae=stats.mean_absolute_error(numbers),
        mae_ci=ci(numbers, stats.mean_absolute_error),
        spearman=stats.spearman(numbers),
        spearman_ci=ci(numbers, stats.spearman),
        threshold=max(thresholds) if len(thresholds) == 1 else None,
        suggested=suggested,
    )


def by_version(
    pairs: Sequence[Pair],
    *,
    judge: str,
    reference: str,
    split: bool = True,
    intervals: bool = True,
    resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = stats.DEFAULT_SEED,
) -> list[Agreement]:
    """:func:`measure` per judge version (in the order versions first appear), then for all
    versions together when there are several (or only that, without ``split``)."""
    groups: dict[str, list[Pair]] = {}
    for p in pairs:
        groups.setdefault(p.judge.version, []).append(p)
    out = []
    if split:
        for version, group in groups.items():
            out.append(
                measure(
                    group,
                    judge=judge,
                    reference=reference,
                    version=version,
                    intervals=intervals,
                    resamples=resamples,
                    seed=seed,
                )
            )
    if not split or len(groups) > 1:
        out.append(
            measure(
                pairs,
                judge=judge,
                reference=reference,
                version=ALL_VERSIONS,
                intervals=intervals,
                resamples=resamples,
                seed=seed,
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class Disagreement:
    pair: Pair
    why: str


def disagreements(pairs: Sequence[Pair], *, tolerance: float = 0.25) -> list[Disagreement]:
    """Pairs where the judge and the reference differ: different labels, or (without labels on
    both sides) numbers further apart than ``tolerance``. Largest differences first, then by target."""
    found: list[tuple[float, Disagreement]] = []
    for p in pairs:
        j, r = p.judge, p.reference
        if j.label is not None and r.label is not None:
            if j.label != r.label:
                gap = abs(j.score - r.score) if j.score is not None and r.score is not None else 1.0
                found.append((gap, Disagreement(p, f"judge {j.label}, reference {r.label}")))
        elif j.score is not None and r.score is not None and abs(j.score - r.score) > tolerance:
            gap = abs(j.score - r.score)
            found.append((gap, Disagreement(p, f"judge {j.score:g}, reference {r.score:g} (differ by {gap:.2g})")))
    found.sort(key=lambda item: (-item[0], item[1].pair.judge.key))
    return [d for _, d in found]
