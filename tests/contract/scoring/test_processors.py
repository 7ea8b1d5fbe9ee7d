"""Input/output processors and RedactPII."""

from __future__ import annotations

from typing import Any

import pytest
from support.agent_runs import MODEL

from tests.fakes import FakeOpenAI, Reply
from tracescorer import Judge, PromptStep, RedactPII, ScorerRun, create_scorer
from tracescorer.scorers import InputProcessor, OutputProcessor


@pytest.mark.parametrize(
    ("text", "placeholder"),
    [
        ("mail me at jane.doe+x@example.co.uk please", "[REDACTED_EMAIL]"),
        ("call +1 415-555-0132 now", "[REDACTED_PHONE]"),
        ("or (020) 7946 0958", "[REDACTED_PHONE]"),
        ("card 4111 1111 1111 1111 exp", "[REDACTED_CARD]"),
        ("card 4111-1111-1111-1111", "[REDACTED_CARD]"),
        ("key sk-proj-abcdefghijklmnopqrstuvwx123", "[REDACTED_API_KEY]"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc.def", "[REDACTED_API_KEY]"),
        ("aws AKIAIOSFODNN7EXAMPLE", "[REDACTED_API_KEY]"),
        ("from 192.168.10.254 today", "[REDACTED_IP]"),
        ("v6 2001:0db8:85a3:0000:0000:8a2e:0370:7334", "[REDACTED_IP]"),
    ],
)
def test_redacts(text: str, placeholder: str) -> None:
    out = RedactPII().redact(text)
    assert placeholder in out


def test_leaves_ordinary_text_and_non_luhn_numbers() -> None:
    r = RedactPII()
    text = "Order 1234 5678 9012 3456 shipped on 2024-05-01, version 1.2.3, 21 degrees."
    assert r.redact(text) == text


def test_kinds_selectable() -> None:
    r = RedactPII(kinds=("email",))
    assert r.redact("a@b.io 10.0.0.1") == "[REDACTED_EMAIL] 10.0.0.1"
    with pytest.raises(ValueError, match="unknown PII kinds"):
        RedactPII(kinds=("zip_code",))


def test_protocols() -> None:
    assert isinstance(RedactPII(), InputProcessor)

    class Out:
        def process_output(self, text: str) -> str:
            return text

    assert isinstance(Out(), OutputProcessor)


def test_content_parts_redacted() -> None:
    msgs = RedactPII().process_input(
        [{"role": "user", "content": [{"type": "text", "text": "me@x.org"}, {"type": "image_url", "image_url": "u"}]}]
    )
    assert msgs[0]["content"][0]["text"] == "[REDACTED_EMAIL]"
    assert msgs[0]["content"][1] == {"type": "image_url", "image_url": "u"}


async def test_redaction_happens_before_the_wire(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("GRADE", Reply.json({"score": 1}))

    class Tag:
        async def process_input(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [*messages, {"role": "user", "content": "GRADE tail"}]

    judge = Judge(model=MODEL, instructions="ops: admin@corp.com", input_processors=[RedactPII(), Tag()], **judge_opts)
    scorer = create_scorer(id="pii", judge=judge).generate_score(
        PromptStep(description="s", create_prompt=lambda *, run, results: f"GRADE {run.output}")
    )
    result = await scorer.run(ScorerRun(output="user bob@example.com from 10.1.2.3"))
    wire = fake.requests[0].prompt_text
    assert "bob@example.com" not in wire and "admin@corp.com" not in wire
    assert "10.1.2.3" not in wire and "[REDACTED_EMAIL]" in wire and "GRADE tail" in wire
    # what is stored is what was sent: the prompt after the processors
    assert result.generate_score_prompt == "GRADE user [REDACTED_EMAIL] from [REDACTED_IP]\n\nGRADE tail"
    assert result.judge_calls[0].prompt == result.generate_score_prompt
    assert result.judge_calls[0].input_processors == ("RedactPII", "Tag")
    assert result.judge_calls[0].redactions == {"email": 2, "ip": 1}
    assert result.redacted and result.redactions == {"email": 2, "ip": 1}
