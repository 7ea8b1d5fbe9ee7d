"""Score and decision records <-> row values (plain data both ways)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracescorer.store.jsonvalue import dumps
from tracescorer.store.records import DecisionRecord, ScoreRecord, field_names, json_fields, plain

SCORE_FIELDS = field_names(ScoreRecord)
DECISION_FIELDS = field_names(DecisionRecord)
_SCORE_JSON = json_fields(ScoreRecord)


def _json(value: Any) -> str | None:
    # lossless (jsonvalue tags NaN, bytes, tag-like keys); plain() turns models into data first
    return None if value is None else dumps(plain(value))


def score_values(record: ScoreRecord) -> tuple[Any, ...]:
    """One score row in :data:`SCORE_FIELDS` order, JSON fields encoded."""
    return tuple(_json(getattr(record, name)) if name in _SCORE_JSON else getattr(record, name)
                 for name in SCORE_FIELDS)


def decision_values(record: DecisionRecord) -> tuple[Any, ...]:
    return tuple(getattr(record, name) for name in DECISION_FIELDS)


def score_values_many(records: Sequence[ScoreRecord]) -> list[tuple[Any, ...]]:
    return [score_values(r) for r in records]
