"""Output schemas: compilation, validation and JSON parsing."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from tracescorer.scorers import JudgeOutputError, ScorerConfigError
from tracescorer.scorers.structured import SCORE_SCHEMA, compile_schema, parse_json_text


class Verdict(BaseModel):
    ok: bool


def test_default_score_schema() -> None:
    compiled = compile_schema(SCORE_SCHEMA)
    assert compiled.validate({"score": 0.5}) == {"score": 0.5}
    assert compiled.validate({"score": 3}) == {"score": 3}
    for bad in ({"score": "high"}, {"score": True}, {}, {"score": 1, "extra": 2}, [1]):
        with pytest.raises(JudgeOutputError):
            compiled.validate(bad)
    assert compiled.response_format["json_schema"]["schema"] == SCORE_SCHEMA


def test_pydantic_and_dict_schemas() -> None:
    model = compile_schema(Verdict)
    assert model.validate({"ok": True}) == Verdict(ok=True)
    assert model.name == "Verdict" and "ok" in model.prompt_instructions
    with pytest.raises(JudgeOutputError, match="Verdict"):
        model.validate({"ok": "maybe?"})
    titled = compile_schema(
        {"title": "My Output!", "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    )
    assert titled.name == "My_Output_"
    assert titled.validate({"n": 2}) == {"n": 2}
    with pytest.raises(JudgeOutputError, match="'n' is a required property"):
        titled.validate({})
    with pytest.raises(ScorerConfigError):
        compile_schema("not a schema")  # type: ignore[arg-type]
    with pytest.raises(ScorerConfigError):
        compile_schema({"type": "no-such-type"}).validate({})


def test_parse_json_text() -> None:
    assert parse_json_text('{"a": 1}') == {"a": 1}
    assert parse_json_text('Sure!\n```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_json_text("```\n[1, 2]\n```") == [1, 2]
    assert parse_json_text('verdict: {"a": {"b": 2}} done') == {"a": {"b": 2}}
    for bad in ("", "   ", None, "no json here", "{broken", "```json\n{nope}\n```"):
        with pytest.raises(JudgeOutputError):
            parse_json_text(bad)
