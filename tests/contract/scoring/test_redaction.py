"""RedactPII on realistic personal data, and that what is stored is what was sent.

The ten strings of issue 12, one per kind, go through the detectors; then through a judge
call to the fake OpenAI server (nothing personal may reach the wire); then through the daemon's
scoring runner into a real DuckDB file (nothing personal may be stored with the score).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from support.agent_runs import MODEL
from support.db import fetch

from tests.fakes import FakeOpenAI, Reply
from tracescorer import Judge, PromptStep, RedactPII, ScorerRun, create_scorer
from tracescorer.model import AgentRun, Message, Part
from tracescorer.scorers.pii import PII_KINDS, Detector, RegexDetector, default_detectors, iban_ok

# (kind, text, the personal data in it that must disappear)
TEN = [
    ("email", "Reach me at jane.doe+billing@example.co.uk if it fails.", ["jane.doe+billing@example.co.uk"]),
    ("phone", "My US number is (415) 555-0132, call after 5.", ["(415) 555-0132", "555-0132"]),
    ("card", "Charge card 4111 1111 1111 1111, exp 04/27.", ["4111 1111 1111 1111"]),
    (
        "api_key",
        "Our key is sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXyZ0 do not share.",
        ["sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXyZ0"],
    ),
    (
        "api_key",
        "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig'",
        ["eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig"],
    ),
    ("ip", "Logins from 203.0.113.42 and 2001:db8::1 were blocked.", ["203.0.113.42", "2001:db8::1"]),
    ("phone", "Text my UK mobile 07700 900123 instead.", ["07700 900123", "900123"]),
    ("ssn", "SSN on file: 078-05-1120.", ["078-05-1120"]),
    ("iban", "Refund to IBAN GB82 WEST 1234 5698 7654 32 please.", ["GB82 WEST 1234 5698 7654 32", "5698 7654"]),
    (
        "address",
        "Ship to 742 Evergreen Terrace, Springfield; born 12/05/1984; passport number 533380006.",
        ["742 Evergreen Terrace", "12/05/1984", "533380006"],
    ),
]


@pytest.mark.parametrize(("kind", "text", "secrets"), TEN, ids=[f"{i}-{k}" for i, (k, _, _) in enumerate(TEN)])
def test_each_kind_is_redacted(kind: str, text: str, secrets: list[str]) -> None:
    redacted, counts = RedactPII().redact_counting(text)
    for secret in secrets:
        assert secret not in redacted, (secret, redacted)
    assert f"[REDACTED_{kind.upper()}]" in redacted and counts.get(kind, 0) >= 1


def test_the_address_line_redacts_its_date_of_birth_and_passport_too() -> None:
    redacted, counts = RedactPII().redact_counting(TEN[-1][1])
    assert counts == {"address": 1, "date_of_birth": 1, "passport": 1}
    assert redacted == (
        "Ship to [REDACTED_ADDRESS], Springfield; born [REDACTED_DATE_OF_BIRTH]; passport number [REDACTED_PASSPORT]."
    )


@pytest.mark.parametrize(
    "address",
    [
        "2001:db8::1",
        "::1",
        "::",
        "fe80::1%eth0",
        "::ffff:192.0.2.128",
        "2001:DB8:0:0:8:800:200C:417A",
        "2001:db8:85a3::8a2e:370:7334",
        "64:ff9b::192.0.2.33",
        "[2001:db8::42]:8443",
    ],
)
def test_ipv6_in_every_form(address: str) -> None:
    redacted = RedactPII(kinds=["ip"]).redact(f"peer {address} closed")
    assert redacted in ("peer [REDACTED_IP] closed", "peer [[REDACTED_IP]]:8443 closed"), redacted


@pytest.mark.parametrize(
    "number",
    [
        "+44 7700 900123",
        "+33 6 12 34 56 78",
        "+49 30 901820",
        "+91 98765 43210",
        "0044 20 7946 0958",
        "+1-212-555-0199",
    ],
)
def test_international_phone_numbers(number: str) -> None:
    assert RedactPII(kinds=["phone"]).redact(f"call {number} now") == "call [REDACTED_PHONE] now"


@pytest.mark.parametrize(
    "text",
    [
        "Order 1234 5678 9012 3456 shipped on 2024-05-01, version 1.2.3, 21 degrees.",
        "Meeting at 12:30:45, device 00:1A:2B:3C:4D:5E, build 10.2.3.",
        "Ticket 12345678 and invoice 2024-001 for 99.50 EUR.",
        "SSN-like 123-45-678 and 000-12-3456 are not valid SSNs.",
        "GB00 WEST 1234 5698 7654 32 fails the IBAN checksum.",
    ],
)
def test_ordinary_numbers_are_left_alone(text: str) -> None:
    assert RedactPII().redact(text) == text


def test_iban_checksum() -> None:
    assert iban_ok("DE89 3704 0044 0532 0130 00") and iban_ok("fr1420041010050500013m02606")
    assert not iban_ok("DE89 3704 0044 0532 0130 01")


def test_detectors_are_pluggable() -> None:
    import re

    employee = RegexDetector(kind="employee_id", pattern=re.compile(r"\bEMP-\d{6}\b"))
    assert isinstance(employee, Detector)
    r = RedactPII(detectors=(*default_detectors(), employee))
    assert r.redact("EMP-123456 mailed a@b.io") == "[REDACTED_EMPLOYEE_ID] mailed [REDACTED_EMAIL]"
    only = RedactPII(detectors=(employee,))
    assert only.redact("EMP-123456 mailed a@b.io") == "[REDACTED_EMPLOYEE_ID] mailed a@b.io"
    assert RedactPII(kinds=["iban"]).redact(TEN[8][1]) == "Refund to IBAN [REDACTED_IBAN] please."
    with pytest.raises(TypeError, match="not a Detector"):
        RedactPII(detectors=("email",))  # type: ignore[arg-type]
    assert set(PII_KINDS) >= {
        "email",
        "phone",
        "card",
        "api_key",
        "ip",
        "ssn",
        "iban",
        "address",
        "date_of_birth",
        "passport",
    }


def _all_text() -> str:
    return "\n".join(text for _, text, _ in TEN)


def _secrets() -> list[str]:
    return [s for _, _, secrets in TEN for s in secrets]


async def test_nothing_personal_reaches_the_wire_or_the_result(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("Transcript", Reply.json({"score": 1}))
    fake.script("Explain", Reply.text("Fine."))
    judge = Judge(model=MODEL, instructions="Grade.", input_processors=[RedactPII()], **judge_opts)
    scorer = (
        create_scorer(id="pii", judge=judge)
        .generate_score(PromptStep(description="s", create_prompt=lambda *, run, results: f"Transcript:\n{run.output}"))
        .generate_reason(
            PromptStep(
                description="r", create_prompt=lambda *, run, results, score: f"Explain {score} for:\n{run.output}"
            )
        )
    )
    result = await scorer.run(ScorerRun(output=_all_text() * 3))  # > the in-thread size
    wire = "\n".join(r.prompt_text for r in fake.requests)
    stored = [result.generate_score_prompt, result.generate_reason_prompt, *(c.prompt for c in result.judge_calls)]
    for secret in _secrets():
        assert secret not in wire, secret
        assert not any(secret in (p or "") for p in stored), secret
    assert result.redacted and all(c.input_processors == ("RedactPII",) for c in result.judge_calls)
    assert result.redactions["phone"] == 2 * 3 * 2  # two numbers, three copies, two calls
    assert "[REDACTED_IBAN]" in (result.generate_score_prompt or "")


async def test_unredacted_judge_says_so(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("X", Reply.json({"score": 1}))
    scorer = create_scorer(id="plain", judge=Judge(model=MODEL, **judge_opts)).generate_score(
        PromptStep(description="s", create_prompt=lambda *, run, results: "X")
    )
    result = await scorer.run(ScorerRun(output="x"))
    assert not result.redacted and result.judge_calls[0].redactions is None


# -- through the daemon's scoring runner into DuckDB ----------------------------------------------
def pii_scorer() -> Any:
    """A python scorer binding target: an LLM scorer redacting its judge input."""
    return (
        create_scorer(id="pii-judge", judge=Judge(input_processors=[RedactPII()]), type="agent")
        .analyze(
            PromptStep(
                description="a",
                output_schema={"type": "object"},
                create_prompt=lambda *, run, results: (
                    f"Analyse:\n{run.input.input_messages[0].content}\n{run.output[0].content}"
                ),
            )
        )
        .generate_score(
            PromptStep(description="s", create_prompt=lambda *, run, results: f"Score:\n{run.output[0].content}")
        )
        .generate_reason(
            PromptStep(
                description="r", create_prompt=lambda *, run, results, score: f"Reason:\n{run.output[0].content}"
            )
        )
    )


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Any]:
    from tracescorer.store.duckdb import DuckDBStore

    s = DuckDBStore(tmp_path / "pii.duckdb")
    await s.start()
    yield s
    await s.stop()


async def test_no_stored_prompt_holds_the_original_pii(tmp_path: Path, store: Any, fake: FakeOpenAI) -> None:
    from tracescorer.config import Settings
    from tracescorer.metrics import Metrics
    from tracescorer.runner.bindings import build_bindings
    from tracescorer.runner.stage import ScoringRunner

    fake.script("Analyse:", Reply.json({"ok": True}))
    fake.script("Score:", Reply.json({"score": 0.5}))
    fake.script("Reason:", Reply.text("Redacted fine."))
    settings = Settings.model_validate(
        {
            "store": {"path": str(tmp_path / "pii.duckdb")},
            "scoring": {"recover_window_s": 0},
            "judge": {"model": MODEL, "api_base": fake.base_url, "api_key": "sk-test"},
            "scorers": [{"id": "pii-judge", "python": "contract.scoring.test_redaction:pii_scorer"}],
        }
    )
    half = len(TEN) // 2
    user = "\n".join(t for _, t, _ in TEN[:half])
    answer = "\n".join(t for _, t, _ in TEN[half:])
    run = AgentRun(
        run_id="r1",
        trace_id="a" * 32,
        span_id="b" * 16,
        parent_span_id=None,
        conversation_id=None,
        resource_id=None,
        agent_name="support",
        agent_id=None,
        service_name="svc",
        convention="genai",
        model="m",
        started_at=1,
        ended_at=2,
        status="ok",
        error=None,
        input_messages=(Message(role="user", content=user, parts=(Part(type="text", content=user),)),),
        output=(Message(role="assistant", content=answer, parts=(Part(type="text", content=answer),)),),
    )
    runner = ScoringRunner(build_bindings(settings.scorers, settings.judge), store, store, Metrics(), settings)
    await runner.start()
    runner.on_runs([run])
    await runner.stop(time.monotonic() + 30)
    rows = await fetch(
        store,
        "SELECT status, score, preprocess_prompt, analyze_prompt, generate_score_prompt, "
        "generate_reason_prompt, reason, CAST(metadata AS VARCHAR), "
        "CAST(analyze_step_result AS VARCHAR) FROM scores",
    )
    assert len(rows) == 1
    status, score, *texts = rows[0]
    assert status == "ok" and score == 0.5
    assert texts[1] and "[REDACTED_" in texts[1] and texts[2] and texts[3]
    stored = json.dumps(texts)
    for secret in _secrets():
        assert secret not in stored, secret
    assert len(fake.requests) == 3
    for request in fake.requests:
        for secret in _secrets():
            assert secret not in request.prompt_text, secret
