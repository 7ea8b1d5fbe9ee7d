"""Score and decision records <-> row values (plain data both ways)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracescorer.store.jsonvalue import dumps
from tracescorer.store.records import DecisionRecord, ScoreRecord, field_names, json_fields, plain

SCORE_FIELDS = field_names(ScoreRecord)
DECISION_FIELDS = field_names(DecisionRecord)
_SCORE_JSON = json_fields(ScoreRecord)


def score_values(record: ScoreRecord) -> tuple[Any, ...]:
    """One score row in :data:`SCORE_FIELDS` order, JSON fields encoded."""
    return tuple(
        (None if (v := getattr(record, name)) is None else dumps(plain(v))) if name in _SCORE_JSON
        else getattr(record, name)
        for name in SCORE_FIELDS
    )


def decision_values(record: DecisionRecord) -> tuple[Any, ...]:
    return tuple(getattr(record, name) for name in DECISION_FIELDS)


def score_values_many(records: Sequence[ScoreRecord]) -> list[tuple[Any, ...]]:
    return [score_values(r) for r in records]
