"""Property tests of the text handling that guards judge prompts and parses judge replies."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tracescorer.scorers.fence import fence, numbered_transcript
from tracescorer.scorers.processors import RedactPII
from tracescorer.scorers.structured import parse_json_text

DELIMITER_BITS = st.sampled_from(
    ["<<<", ">>>", "<<<<", "BEGIN_UNTRUSTED_", "END_UNTRUSTED_", "TRANSCRIPT", "begin_untrusted_", ">", "<", "\n", " "]
)
TEXTS = st.lists(st.one_of(DELIMITER_BITS, st.text(max_size=20)), max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_fence_has_exactly_one_pair_of_delimiters(text: str) -> None:
    fenced = fence(text, "TRANSCRIPT")
    assert fenced.count("<<<BEGIN_UNTRUSTED_TRANSCRIPT>>>") == 1
    assert fenced.count("<<<END_UNTRUSTED_TRANSCRIPT>>>") == 1
    assert fenced.startswith("<<<BEGIN_UNTRUSTED_TRANSCRIPT>>>")
    assert fenced.endswith("<<<END_UNTRUSTED_TRANSCRIPT>>>")
    inner = fenced[len("<<<BEGIN_UNTRUSTED_TRANSCRIPT>>>") : -len("<<<END_UNTRUSTED_TRANSCRIPT>>>")]
    assert "<<<" not in inner and ">>>" not in inner


@settings(max_examples=100, deadline=None)
@given(st.lists(TEXTS, max_size=5))
def test_transcript_numbering(turns: list[str]) -> None:
    out = numbered_transcript(turns)
    for i in range(1, len(turns) + 1):
        assert f"[{i}] Assistant: " in out


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4),
    st.sampled_from(["{}", "```json\n{}\n```", "Verdict:\n```\n{}\n```\nthanks", " {} "]),
)
def test_parse_json_text_round_trips(value: dict[str, object], wrapper: str) -> None:
    text = wrapper.replace("{}", json.dumps(value))
    assert parse_json_text(text) == value


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_redaction_is_idempotent(text: str) -> None:
    r = RedactPII()
    once = r.redact(text)
    assert r.redact(once) == once
