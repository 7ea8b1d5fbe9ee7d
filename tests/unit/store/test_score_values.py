"""Score rows keep their JSON fields losslessly: NaN and infinities, bytes, keys that look like
the store's tags (a fast encoder that writes NaN as null would lose them)."""

from __future__ import annotations

import math

from tracescorer.store.jsonvalue import loads
from tracescorer.store.records import ScoreRecord
from tracescorer.store.scores import SCORE_FIELDS, score_values


def test_json_fields_round_trip_what_plain_json_cannot_hold():
    metadata = {"x": float("nan"), "big": float("inf"), "inner": {"$bytes": "abc"}, "raw": b"\x00\x01"}
    record = ScoreRecord(id="s1", scorer_id="s", scorer_name="S", run_id=None, trace_id=None, span_id=None,
                         conversation_id=None, entity_type="agent", entity_id=None, source="live", score=None,
                         reason=None, status="ok", metadata=metadata, analyze_step_result=[1.5, float("-inf")])
    row = dict(zip(SCORE_FIELDS, score_values(record)))
    back = loads(row["metadata"])
    assert math.isnan(back["x"]) and back["big"] == float("inf")
    assert back["inner"] == {"$bytes": "abc"} and back["raw"] == b"\x00\x01"
    assert loads(row["analyze_step_result"]) == [1.5, float("-inf")]
    assert row["preprocess_step_result"] is None
