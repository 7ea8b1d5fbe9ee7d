"""The lossless JSON encoding: whichever path dumpb takes (attribute maps checked flat, the rest
tagged) it gives exactly what tagging the whole tree gives, and round-trips."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracescorer.store.jsonvalue import _tag, dumpb, loads

_keys = st.sampled_from(["a", "null", "$bytes", "$double", "$kvlist", "$x", "k"]) | st.text(max_size=6)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=True)
    | st.sampled_from(["null", "$bytes", "a$b", '"$', ""])
    | st.text(max_size=8)
    | st.binary(max_size=6)
)
values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=12,
)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=False))
    return type(a) is type(b) and a == b


@settings(max_examples=400, deadline=None)
@given(values)
def test_dumpb_is_the_tagged_encoding_and_round_trips(value: Any) -> None:
    assert dumpb(value) == orjson.dumps(_tag(value))
    assert _same(value, loads(dumpb(value)))


@pytest.mark.parametrize(
    "value",
    [
        {"x": float("nan")},
        [1.0, float("inf")],
        {"$bytes": "abc"},
        {"raw": b"\x00"},
        {"a": None, "b": [None]},
        {"s": "null", "t": "$bytes"},
        [{"$double": 1}],
    ],
)
def test_values_the_encoder_alone_would_change_are_tagged(value: Any) -> None:
    assert dumpb(value) == orjson.dumps(_tag(value))
    assert _same(value, loads(dumpb(value)))


@pytest.mark.parametrize("value", ["\ud800", {"k": "\udfff"}, 2**64, {"big": [-(2**70)]}])
def test_values_json_cannot_carry_raise_type_error(value: Any) -> None:
    with pytest.raises(TypeError):
        dumpb(value)
