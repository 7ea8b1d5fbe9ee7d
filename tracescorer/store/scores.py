"""Score and decision records <-> row values (plain data both ways)."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from tracescorer.records.scores import DecisionRecord, ScoreRecord, VerdictRecord, field_names, json_fields, plain
from tracescorer.store.jsonvalue import dumps

SCORE_FIELDS = field_names(ScoreRecord)
DECISION_FIELDS = field_names(DecisionRecord)
_SCORE_JSON = json_fields(ScoreRecord)
_SCORE_GET = attrgetter(*SCORE_FIELDS)
_SCORE_JSON_AT = tuple(i for i, name in enumerate(SCORE_FIELDS) if name in _SCORE_JSON)
_DECISION_GET = attrgetter(*DECISION_FIELDS)
VERDICT_FIELDS = field_names(VerdictRecord)
_VERDICT_GET = attrgetter(*VERDICT_FIELDS)


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


def verdict_values(record: VerdictRecord) -> tuple[Any, ...]:
    """One ``judge_verdicts`` row in :data:`VERDICT_FIELDS` order (``judged_at`` is the store's)."""
    return _VERDICT_GET(record)


def verdict_from_row(row: Sequence[Any]) -> VerdictRecord:
    """A :class:`VerdictRecord` from its values in :data:`VERDICT_FIELDS` order."""
    return VerdictRecord(**dict(zip(VERDICT_FIELDS, row, strict=True)))


def score_values_many(records: Sequence[ScoreRecord]) -> list[tuple[Any, ...]]:
    return [score_values(r) for r in records]


_ID, _ENTITY, _SEQ = (SCORE_FIELDS.index(f) for f in ("id", "entity_type", "activity_seq"))
_DECISION_SCORE = DECISION_FIELDS.index("score_id")
Row = tuple[Any, ...]


def newest_scores(
    scores: Sequence[Row], hints: Sequence[bool], seqs: dict[str, int]
) -> tuple[list[Row], list[bool], set[str]]:
    """The score rows (:func:`score_values`) to write, in order: a conversation score of an older
    activity than ``seqs`` has stored for its id (or than an earlier row of the batch) is left out:
    a late write of a daemon whose claim was lost since must not replace the newer scoring's row.
    A row without a seq (heal, backfill, one daemon) is written with the stored seq. Returns the
    rows, their ``hints``, and the ids all of whose rows were left out (their decisions are too);
    ``seqs`` learns the batch's seqs."""
    rows: list[Row] = []
    kept: list[bool] = []
    left: set[str] = set()
    for row, hint in zip(scores, hints, strict=True):
        sid, seq = row[_ID], row[_SEQ]
        have = seqs.get(sid) if row[_ENTITY] == "conversation" else None
        if seq is not None and have is not None and seq < have:
            left.add(sid)
            continue
        if have is not None and seq is None:
            row = (*row[:_SEQ], have, *row[_SEQ + 1 :])
        if row[_SEQ] is not None:
            seqs[sid] = row[_SEQ]
        rows.append(row)
        kept.append(hint)
    return rows, kept, left - {r[_ID] for r in rows}


def conversation_score_ids(scores: Sequence[Row]) -> list[str]:
    """The ids of the conversation score rows among ``scores`` (those :func:`newest_scores` orders)."""
    return sorted({r[_ID] for r in scores if r[_ENTITY] == "conversation"})


def without_scores(decisions: Sequence[Row], score_ids: set[str]) -> list[int]:
    """The indexes of the decision rows not about one of ``score_ids``."""
    return [i for i, d in enumerate(decisions) if d[_DECISION_SCORE] not in score_ids]
