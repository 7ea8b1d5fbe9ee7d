"""Label and evaluation records <-> row values (plain data both ways), for both engines."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from tracescorer.records.labels import EvaluationRecord, LabelRecord
from tracescorer.records.scores import field_names, json_fields, plain
from tracescorer.store.jsonvalue import dumps

LABEL_FIELDS = field_names(LabelRecord)
EVALUATION_FIELDS = field_names(EvaluationRecord)
_LABEL_GET = attrgetter(*LABEL_FIELDS)
_EVALUATION_GET = attrgetter(*EVALUATION_FIELDS)
_EVALUATION_JSON_AT = tuple(i for i, n in enumerate(EVALUATION_FIELDS) if n in json_fields(EvaluationRecord))


def label_values(record: LabelRecord) -> tuple[Any, ...]:
    """One label row in :data:`LABEL_FIELDS` order (``labelled_at`` in epoch seconds)."""
    return tuple(_LABEL_GET(record))


def evaluation_values(record: EvaluationRecord) -> tuple[Any, ...]:
    """One evaluation row in :data:`EVALUATION_FIELDS` order, JSON fields encoded."""
    values = list(_EVALUATION_GET(record))
    for i in _EVALUATION_JSON_AT:
        values[i] = None if values[i] is None else dumps(plain(values[i]))
    return tuple(values)


def newest_first_wins(labels: Sequence[LabelRecord]) -> list[LabelRecord]:
    """One label per id, the most recent one (``labelled_at``; the later in the batch among equals)."""
    latest: dict[str, LabelRecord] = {}
    for label in labels:
        held = latest.get(label.id)
        if held is None or label.labelled_at >= held.labelled_at:
            latest[label.id] = label
    return list(latest.values())
