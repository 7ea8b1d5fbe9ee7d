"""extract_runs never raises, explains unmatched traces; shared parsing helpers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracescorer.conventions import CONVENTIONS, Convention, TraceView, extract_runs, names, run_id_for
from tracescorer.conventions.common import (
    is_genuine_user,
    parse_arguments,
    parse_messages,
    parse_system_instructions,
    split_history,
    text_message,
)
from tracescorer.model import Message, Part, Span


def span(sid: str, trace: str = "1" * 32, parent: str | None = None, name: str = "s", **attrs: Any) -> Span:
    return Span(
        trace_id=trace,
        span_id=sid,
        parent_span_id=parent,
        name=name,
        kind="internal",
        start_time_unix_nano=int(sid, 16),
        end_time_unix_nano=int(sid, 16) + 10,
        attributes=attrs,
    )


def chat(sid: str, trace: str = "1" * 32, parent: str | None = None, **attrs: Any) -> Span:
    return span(
        sid,
        trace,
        parent,
        "chat",
        **{
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "q"}]}]),
            **attrs,
        },
    )


def test_no_convention_gives_a_reason_not_an_exception() -> None:
    ex = extract_runs([span("0000000000000001", name="GET /health", **{"http.method": "GET"})])
    assert ex.runs == []
    assert ex.unmatched_reason and "no known" in ex.unmatched_reason
    assert extract_runs([]).unmatched_reason == "no spans"


def _explode(span: Span, trace: TraceView) -> None:
    raise KeyError("bad data")


EXPLODING = Convention(name="exploding", detect=lambda facts: 1.0, agent=_explode)


def test_convention_exception_becomes_reason_and_next_convention_is_tried() -> None:
    spans = [chat("0000000000000001")]
    ex = extract_runs(spans, conventions=(EXPLODING, *CONVENTIONS))
    assert len(ex.runs) == 1 and ex.unmatched_reason is None
    ex = extract_runs(spans, conventions=(EXPLODING,))
    assert ex.runs == [] and ex.unmatched_reason is not None and "exploding failed: KeyError" in ex.unmatched_reason


def test_names_derive_from_the_records() -> None:
    assert names() == tuple(dict.fromkeys(c.run_label for c in CONVENTIONS))
    assert {"genai", "openinference", "vercel", "mastra", "pydantic_ai", "openllmetry", "logfire"} <= set(names())
    assert len({c.name for c in CONVENTIONS}) == len(CONVENTIONS)


def test_several_traces_extra_conversation_key_and_incomplete_flag() -> None:
    a = chat("0000000000000001", trace="a" * 32, **{"app.chat_id": "room-1"})
    b = chat("0000000000000002", trace="b" * 32, **{"gen_ai.conversation.id": "std"})
    ex = extract_runs([b, a], conversation_keys=["app.chat_id"], incomplete=True)
    assert [r.trace_id for r in ex.runs] == ["a" * 32, "b" * 32]
    assert [r.conversation_id for r in ex.runs] == ["room-1", "std"]
    assert all(r.attributes["tracescorer.incomplete"] is True for r in ex.runs)
    assert ex.runs[0].run_id == run_id_for("a" * 32, "0000000000000001")


def test_orphans_and_duplicates_are_tolerated() -> None:
    orphan = chat("0000000000000005", parent="00000000000000ff")  # parent never arrived
    ex = extract_runs([orphan, orphan])
    (run,) = ex.runs
    assert run.parent_span_id == "00000000000000ff"


def test_parse_arguments_double_encoded_and_plain() -> None:
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments(json.dumps('{"a": 1}')) == {"a": 1}
    assert parse_arguments({"a": 1}) == {"a": 1}
    assert parse_arguments("not json") == "not json"


def test_system_instructions_forms() -> None:
    assert [m.content for m in parse_system_instructions("plain")] == ["plain"]
    assert [m.content for m in parse_system_instructions([{"type": "text", "content": "x"}])] == ["x"]
    assert parse_system_instructions("") == []


def test_parts_of_every_type_are_kept() -> None:
    (msg,) = parse_messages(
        [
            {
                "role": "user",
                "parts": [
                    {"type": "text", "content": "look"},
                    {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "AAA="},
                    {"type": "uri", "modality": "image", "uri": "https://x/y.png"},
                    {"type": "file", "file_id": "f1", "modality": "document"},
                    {"type": "reasoning", "content": "hmm"},
                ],
            }
        ]
    )
    assert [p.type for p in msg.parts] == ["text", "blob", "uri", "file", "reasoning"]
    assert msg.content == "look"
    assert msg.parts[2].extra["uri"] == "https://x/y.png"


def test_tool_result_user_message_is_not_genuine_user() -> None:
    tool_result = Message(role="user", parts=(Part(type="tool_call_response", id="c", response="r"),))
    assert not is_genuine_user(tool_result)
    assert is_genuine_user(text_message("user", "hi"))


_roles = st.sampled_from(["user", "assistant"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_roles, st.text(min_size=1, max_size=5)), max_size=8))
def test_split_history_partitions_without_double_counting(pairs: list[tuple[str, str]]) -> None:
    given_msgs = [text_message(r, t) for r, t in pairs]
    history, new, rest = split_history(given_msgs)
    assert history + new + rest == given_msgs
    assert all(m.role == "user" for m in new)
    if new:
        assert all(m.role != "user" for m in rest)


@pytest.mark.parametrize("value", [None, 3, "x", "[1, 2]", '{"messages": 5}', [{"no": "role"}]])
def test_parse_messages_rejects_junk_quietly(value: Any) -> None:
    assert parse_messages(value) == []
