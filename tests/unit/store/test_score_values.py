"""Score rows keep their JSON fields losslessly: NaN and infinities, bytes, keys that look like
the store's tags (a fast encoder that writes NaN as null would lose them)."""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import NamedTuple

import pydantic

from tracescorer.records.scores import ScoreRecord, plain
from tracescorer.store.jsonvalue import loads
from tracescorer.store.scores import SCORE_FIELDS, score_values


def test_json_fields_round_trip_what_plain_json_cannot_hold():
    metadata = {"x": float("nan"), "big": float("inf"), "inner": {"$bytes": "abc"}, "raw": b"\x00\x01"}
    record = ScoreRecord(
        id="s1",
        scorer_id="s",
        scorer_name="S",
        run_id=None,
        trace_id=None,
        span_id=None,
        conversation_id=None,
        entity_type="agent",
        entity_id=None,
        source="live",
        score=None,
        reason=None,
        status="ok",
        metadata=metadata,
        analyze_step_result=[1.5, float("-inf")],
    )
    row = dict(zip(SCORE_FIELDS, score_values(record), strict=False))
    back = loads(row["metadata"])
    assert math.isnan(back["x"]) and back["big"] == float("inf")
    assert back["inner"] == {"$bytes": "abc"} and back["raw"] == b"\x00\x01"
    assert loads(row["analyze_step_result"]) == [1.5, float("-inf")]
    assert row["preprocess_step_result"] is None


def test_plain_turns_models_dataclasses_and_subclasses_into_json_data():
    class Colour(str, enum.Enum):
        RED = "red"

    class Pair(NamedTuple):
        a: int
        b: str

    class Model(pydantic.BaseModel):
        when: float
        tags: tuple[str, ...]

    @dataclasses.dataclass
    class Step:
        name: str
        pair: tuple[int, int]

    class Odd:
        def __repr__(self) -> str:
            return "<odd>"

    value = {
        "n": 1,
        "f": 0.5,
        "t": True,
        "none": None,
        "b": b"\x00",
        3: "int key",
        "tuple": (1, "x"),
        "colour": Colour.RED,
        "pair": Pair(1, "y"),
        "model": Model(when=1.5, tags=("a",)),
        "step": Step("s", (1, 2)),
        "odd": Odd(),
        "nested": [{"k": (Odd(),)}],
    }
    assert plain(value) == {
        "n": 1,
        "f": 0.5,
        "t": True,
        "none": None,
        "b": b"\x00",
        "3": "int key",
        "tuple": [1, "x"],
        "colour": Colour.RED,
        "pair": [1, "y"],
        "model": {"when": 1.5, "tags": ["a"]},
        "step": {"name": "s", "pair": [1, 2]},
        "odd": "<odd>",
        "nested": [{"k": ["<odd>"]}],
    }
    assert type(plain(value)["colour"]) is Colour  # a str subclass stays itself, as before
