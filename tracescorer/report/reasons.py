"""How judge reasons are shown (the `scores` table and the report): without the criterion that a
judge's every reason repeats (``Satisfied. Criterion: X. Explanation: Y`` reads ``Satisfied: Y``);
the criterion is said once beside them instead. Stored and exported reasons keep it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def criteria(bindings: Sequence[Any]) -> dict[str, str]:
    """The criterion of each scorer binding that has one (``options.criterion``), by binding id."""
    out = {}
    for binding in bindings:
        criterion = binding.options.get("criterion")
        if isinstance(criterion, str) and criterion.strip():
            out[binding.id] = criterion.strip()
    return out


def without_criterion(reason: str, criterion: str) -> str:
    """``reason`` without the sentence stating ``criterion``; other reasons unchanged."""
    stated = f" Criterion: {criterion.rstrip('.')}."
    if stated not in reason:
        return reason
    head, _, tail = reason.partition(stated)
    tail = tail.strip()
    if tail.startswith("Explanation:"):
        tail = tail[len("Explanation:") :].strip()
    return f"{head.rstrip('.')}: {tail}" if tail else head


def shown_reason(reason: str, scorer_id: str, known: Mapping[str, str]) -> str:
    """``reason`` as shown for ``scorer_id``, given the :func:`criteria` of the bindings."""
    criterion = known.get(scorer_id)
    return without_criterion(reason, criterion) if criterion else reason
