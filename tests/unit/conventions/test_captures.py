"""Every captured case in tests/data/captures must give the runs of its expected.json.

One parametrized test over the folder: a new case (requests/, optional logs/, expected.json)
needs no new code. Requests are decoded with the real OTLP decoder, in file order.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.captures import CASES, CONTRACT_KEYS, check_parents, check_run, load_case

from tracescorer.conventions import extract_runs


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_capture_gives_expected_runs(case: Path) -> None:
    expected = json.loads((case / "expected.json").read_text())
    spans, logs = load_case(case)
    extraction = extract_runs(spans, logs)
    assert extraction.unmatched_reason is None
    assert len(extraction.runs) == len(expected["runs"])
    for got, want in zip(extraction.runs, expected["runs"], strict=False):
        check_run(got.to_dict(), want, expected)
    check_parents([r.to_dict() for r in extraction.runs], expected)
    # The jsonl contract: exactly these keys, and re-extraction gives the same run ids.
    again = extract_runs(list(reversed(spans)), logs)
    assert [r.run_id for r in again.runs] == [r.run_id for r in extraction.runs]
    for r in extraction.runs:
        assert list(r.to_dict()) == CONTRACT_KEYS
        json.dumps(r.to_dict())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_capture_split_per_span_delivery(case: Path) -> None:
    """Spans delivered one per request in reverse order give the same runs."""
    spans, logs = load_case(case)
    whole = extract_runs(spans, logs).runs
    shuffled = extract_runs(spans[::-1], logs[::-1]).runs
    assert [r.to_dict() for r in shuffled] == [r.to_dict() for r in whole]
