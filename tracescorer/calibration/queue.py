"""The label queue: which unlabelled targets a reviewer should label next.

Targets a judge scored and nobody labelled for it are split into strata by score (equal shares of
the targets ordered by score), and each stratum gives its share of the queue, so the queue covers
the whole score range rather than the most common scores. Within a stratum, targets where other
evaluators (``against``) disagree with the judge come first, then a seeded shuffle: the same data
and seed give the same queue.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tracescorer.calibration.agreement import Key, Reference, Verdict

DEFAULT_STRATA = 5
DEFAULT_SEED = 1


@dataclass(frozen=True, slots=True)
class Pick:
    verdict: Verdict
    stratum: int
    disagreeing: tuple[str, ...]  # "<evaluator>=<verdict>" of the evaluators that disagree


def _disagrees(judge: Verdict, other: Reference) -> bool:
    if judge.label is not None and other.label is not None:
        return judge.label != other.label
    if judge.score is not None and other.score is not None:
        return abs(judge.score - other.score) > 0.25
    return False


def _shown(other: Reference) -> str:
    return other.label if other.label is not None else f"{other.score:g}" if other.score is not None else "?"


def pick(
    judged: Sequence[Verdict],
    labelled: set[Key],
    n: int,
    *,
    against: Mapping[str, Mapping[Key, Reference]] | None = None,
    strata: int = DEFAULT_STRATA,
    seed: int = DEFAULT_SEED,
) -> list[Pick]:
    """Up to ``n`` unlabelled scored targets, stratified by score (see the module docstring),
    lowest stratum first."""
    candidates = [v for v in judged if v.key not in labelled and v.score is not None]
    if not candidates or n <= 0:
        return []
    candidates.sort(key=lambda v: (v.score, v.key))
    count = min(max(1, strata), len(candidates))
    groups = [candidates[i * len(candidates) // count : (i + 1) * len(candidates) // count] for i in range(count)]
    rng = random.Random(seed)
    ranked: list[list[Pick]] = []
    for index, group in enumerate(groups):
        picks: list[Pick] = []
        for v in group:
            disagreeing = tuple(
                f"{name}={_shown(refs[v.key])}"
                for name, refs in (against or {}).items()
                if v.key in refs and _disagrees(v, refs[v.key])
            )
            picks.append(Pick(v, index, disagreeing))
        rng.shuffle(picks)
        picks.sort(key=lambda p: -len(p.disagreeing))  # stable: the shuffle orders the rest
        ranked.append(picks)
    chosen: list[Pick] = []
    depth = 0
    while len(chosen) < n and any(depth < len(g) for g in ranked):  # round robin over the strata
        for stratum in ranked:
            if depth < len(stratum) and len(chosen) < n:
                chosen.append(stratum[depth])
        depth += 1
    chosen.sort(key=lambda p: (p.stratum, -len(p.disagreeing)))
    return chosen
