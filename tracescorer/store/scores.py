"""Score and decision records <-> row values (plain data both ways)."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from tracescorer.records.scores import DecisionRecord, ScoreRecord, field_names, json_fields, plain
from tracescorer.store.jsonvalue import dumps

SCORE_FIELDS = field_names(ScoreRecord)
DECISION_FIELDS = field_names(DecisionRecord)
_SCORE_JSON = json_fields(ScoreRecord)
_SCORE_GET = attrgetter(*SCORE_FIELDS)
_SCORE_JSON_AT = tuple(i for i, name in enumerate(SCORE_FIELDS) if name in _SCORE_JSON)
_DECISION_GET = attrgetter(*DECISION_FIELDS)


def _json(value: Any) -> str | None:
    # lossless (jsonvalue tags NaN, bytes, tag-like keys); plain() turns models into data first
    return None if value is None else dumps(plain(value))


def score_values(record: ScoreRecord) -> tuple[Any, ...]:
    """One score row in :data:`SCORE_FIELDS` order, JSON fields encoded."""
    values = list(_SCORE_GET(record))
    for i in _SCORE_JSON_AT:
        values[i] = _json(values[i])
    return tuple(values)


def decision_values(record: DecisionRecord) -> tuple[Any, ...]:
    return _DECISION_GET(record)


def score_values_many(records: Sequence[ScoreRecord]) -> list[tuple[Any, ...]]:
    return [score_values(r) for r in records]
