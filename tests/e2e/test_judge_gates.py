"""Gated judges (``scorers[].when``) through a real daemon: the judge runs only on the runs whose
code check scored below its bound; the others get a ``gated`` decision saying why (in the table
and in ``explain``), and a backfill of the judge alone reads the stored gate score and gates too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakes.fake_openai import FakeOpenAI, Reply
from support.daemon import DaemonProcess, config_dict, wait_for
from support.otlp import agent_trace, span_exporter, tracer

DECISIONS = (
    "SELECT d.scorer_id, d.decision, d.detail, r.trace_id, r.output LIKE '%Sunny%' AS sunny "
    "FROM scoring_decisions d JOIN runs r ON r.run_id = d.target_id"
)


def test_a_judge_runs_only_where_the_code_check_calls_for_it(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script("Criterion:", Reply.json({"satisfied": False, "reasoning": "off topic"}))
        cfg = config_dict(
            tmp_path,
            assembly={"idle_s": 0.2},
            judge={"model": "openai/gpt-4o-mini", "api_base": fake.base_url, "api_key": "k", "retries": 0},
            scorers=[
                {
                    "id": "judge",
                    "prebuilt": "multi_turn_judge",
                    "options": {"criterion": "The agent answered the weather question"},
                    "when": {"scorer": "mentions-weather", "below": 1},
                },
                {"id": "mentions-weather", "prebuilt": "includes", "options": {"text": "sunny"}},
            ],
        )
        daemon = DaemonProcess(tmp_path, cfg).start()
        try:
            with tracer(span_exporter("http", http_url=daemon.http_url)) as t:
                agent_trace(t, answer="Sunny, 22C")
                agent_trace(t, answer="I cannot help with that")
            rows: list[dict[str, Any]] = wait_for(
                lambda: (lambda found: found if len(found) == 4 else None)(daemon.query_json(DECISIONS)),
                60,
                interval_s=0.1,
                what="4 decisions",
            )
            by = {(r["scorer_id"], r["sunny"]): r for r in rows}
            sunny_trace = by[("judge", True)]["trace_id"]
            explained = daemon.cli("explain", sunny_trace).stdout
            backfilled = daemon.cli("backfill", "--scorer", "judge", sunny_trace[:12]).stdout
            after = {(r["scorer_id"], r["sunny"]): r for r in daemon.query_json(DECISIONS)}
        finally:
            assert daemon.stop() == 0, daemon.log()

    assert by[("mentions-weather", True)]["decision"] == "scored"
    assert by[("mentions-weather", False)]["decision"] == "scored"
    gated = by[("judge", True)]
    assert gated["decision"] == "gated"
    assert gated["detail"] == "mentions-weather scored 1; this runs only below 1"
    assert by[("judge", False)]["decision"] == "scored"
    assert fake.attempts("Criterion:") == 1 and "I cannot help" in fake.requests[0].prompt_text
    assert "judge: gated — mentions-weather scored 1; this runs only below 1" in explained, explained
    # on its own, the judge reads the gate's stored score: gated again, no request
    assert "gated: 1" in backfilled, backfilled
    assert after[("judge", True)]["decision"] == "gated" and fake.attempts("Criterion:") == 1
