"""stored_through_slots: the same constructor as dataclasses generates, faster, still frozen."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest

from tracescorer.records.scores import DecisionRecord, ScoreRecord
from tracescorer.slotted import stored_through_slots


def make(fast: bool) -> type[Any]:
    @dataclass(frozen=True, slots=True, kw_only=True)
    class Row:
        id: str
        score: float | None
        label: str | None = None
        tags: list[str] = field(default_factory=list)
        meta: dict[str, Any] | None = field(default=None, metadata={"sql": "JSON"})

    return stored_through_slots(Row) if fast else Row


def values(row: Any) -> tuple[Any, ...]:
    return tuple(getattr(row, f.name) for f in dataclasses.fields(row))


def test_same_values_defaults_and_errors_as_the_generated_init() -> None:
    fast, plain = make(True), make(False)
    for kwargs in ({"id": "a", "score": 1.0}, {"id": "b", "score": None, "label": "x", "tags": ["t"], "meta": {}}):
        assert values(fast(**kwargs)) == values(plain(**kwargs))
    one, two = fast(id="a", score=None), fast(id="a", score=None)
    assert one.tags == [] and one.tags is not two.tags  # a factory per instance
    assert one == two and repr(one) == repr(plain(id="a", score=None)).replace(plain.__qualname__, fast.__qualname__)
    for bad in ({"id": "a"}, {"id": "a", "score": 1, "nope": 1}):
        with pytest.raises(TypeError) as fast_error:
            fast(**bad)
        with pytest.raises(TypeError) as plain_error:
            plain(**bad)
        assert str(fast_error.value).split("(", 1)[1] == str(plain_error.value).split("(", 1)[1]
    with pytest.raises(TypeError):
        fast("a", 1.0)  # keyword-only, as declared


def test_instances_stay_frozen_and_replace_works() -> None:
    row = make(True)(id="a", score=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.score = 2.0
    assert dataclasses.replace(row, score=2.0).score == 2.0 and row.score == 1.0


def test_refuses_what_it_does_not_build() -> None:
    @dataclass(frozen=True, slots=True)
    class Positional:
        x: int

    @dataclass(frozen=True, slots=True, kw_only=True)
    class Posted:
        x: int

        def __post_init__(self) -> None:
            pass

    for cls in (Positional, Posted):
        with pytest.raises(TypeError):
            stored_through_slots(cls)


def test_score_and_decision_rows_use_it() -> None:
    for cls in (ScoreRecord, DecisionRecord):
        assert "_set_id" in cls.__init__.__code__.co_names and cls.__init__.__qualname__ == f"{cls.__name__}.__init__"
