"""Judge verdicts reused, and fallback judge models, through a real daemon with OTLP traces from the
SDK exporter and the fake OpenAI-compatible judge.

Reuse: a run whose judge request (the text sent) is the same as an earlier one under the same
scorer version gets the earlier verdict, after a restart too (the verdict is in the DuckDB file):
no request, no cost, ``judge_reused`` on the score, ``explain`` says so and a metric counts it; a
binding with ``reuse: false`` asks every time; a new scorer version (its threshold changed, the
text sent did not) asks again. Fallbacks: a primary model answering 503 hands the request to the
fallback and the score names the fallback; a 401 of the primary is not handed on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fakes.fake_openai import FakeOpenAI, Reply
from support.daemon import DaemonProcess, config_dict, wait_for
from support.otlp import agent_trace, span_exporter, tracer

VERDICT = Reply.json({"satisfied": True, "reasoning": "answered"})
SCORES = (
    "SELECT s.scorer_id, s.status, s.judge_reused, s.judge_cost_usd, s.judge_attempts, s.judge_model, "
    "s.scorer_version, s.error_type, s.metadata, r.trace_id FROM scores s JOIN runs r USING (run_id) "
    "ORDER BY s.created_at"
)


def _binding(binding_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": binding_id,
        "prebuilt": "multi_turn_judge",
        "scope": "run",
        "options": {"criterion": f"The agent answered ({binding_id})"},
        **extra,
    }


def _config(tmp_path: Path, fake: FakeOpenAI, *, threshold: float | None = None) -> dict[str, Any]:
    return config_dict(
        tmp_path,
        assembly={"idle_s": 0.2},
        judge={"model": "openai/gpt-4o-mini", "api_base": fake.base_url, "api_key": "k", "retries": 0},
        scorers=[_binding("reusing", threshold=threshold), _binding("asking", reuse=False)],
    )


def _send(daemon: DaemonProcess) -> None:
    with tracer(span_exporter("http", http_url=daemon.http_url)) as t:
        agent_trace(t, answer="Sunny, 22C")  # the same run every time: the same judge request


def _scores(daemon: DaemonProcess, count: int) -> list[dict[str, Any]]:
    return wait_for(
        lambda: (lambda rows: rows if len(rows) == count else None)(daemon.query_json(SCORES)),
        60,
        interval_s=0.1,
        what=f"{count} scores",
    )


def test_a_verdict_is_reused_after_a_restart_until_the_scorer_version_changes(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script("Criterion:", VERDICT)
        daemon = DaemonProcess(tmp_path, _config(tmp_path, fake)).start()
        try:
            _send(daemon)
            first = _scores(daemon, 2)
        finally:
            assert daemon.stop() == 0, daemon.log()
        assert fake.attempts("(reusing)") == 1 and fake.attempts("(asking)") == 1

        # restarted: the same run again; the verdict is found in the store file
        daemon = DaemonProcess(tmp_path, _config(tmp_path, fake)).start()
        try:
            _send(daemon)
            second = _scores(daemon, 4)
            reused = next(r for r in second[2:] if r["scorer_id"] == "reusing")
            explained = daemon.cli("explain", reused["trace_id"]).stdout
            counted = daemon.metric("tracescorer_judge_reused_total")
            requests = daemon.metric("tracescorer_judge_calls_total")
        finally:
            assert daemon.stop() == 0, daemon.log()
        assert fake.attempts("(reusing)") == 1, "the reused verdict made no request"
        assert fake.attempts("(asking)") == 2, "reuse: false asks every time"
        assert reused["status"] == "ok" and reused["judge_reused"] == 1
        assert reused["judge_cost_usd"] is None and reused["judge_attempts"] == 0
        original = next(r for r in first if r["scorer_id"] == "reusing")
        assert original["judge_reused"] is None and original["judge_cost_usd"] > 0
        assert reused["scorer_version"] == original["scorer_version"]
        call = json.loads(reused["metadata"])["judge_calls"][0]
        assert call["reused_from"] and call["attempts"] == 0 and call["cost_usd"] is None
        asked = next(r for r in second[2:] if r["scorer_id"] == "asking")
        assert asked["judge_reused"] is None and asked["judge_cost_usd"] > 0
        assert "reused an earlier verdict for 1 judge call (no cost)" in explained, explained
        assert counted == 1.0 and requests == 1.0  # this daemon: one reused, one asked (the other binding)

        # a new version of the binding (its threshold; the text sent is the same) asks again
        daemon = DaemonProcess(tmp_path, _config(tmp_path, fake, threshold=0.5)).start()
        try:
            _send(daemon)
            third = _scores(daemon, 6)
        finally:
            assert daemon.stop() == 0, daemon.log()
        judged = next(r for r in third[4:] if r["scorer_id"] == "reusing")
        assert judged["scorer_version"] != original["scorer_version"]
        assert judged["judge_reused"] is None and judged["judge_cost_usd"] > 0
        assert fake.attempts("(reusing)") == 2


def _to(model: str, text: str | None = None) -> Any:
    return lambda r: r.body.get("model") == model and (text is None or text in r.prompt_text)


def test_a_primary_model_answering_503_hands_the_request_to_the_fallback(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script(_to("gpt-4o-mini"), VERDICT)
        fake.script(_to("primary-judge"), Reply.server_error(503))
        fake.script(_to("primary-judge", "locked out"), Reply.unauthorized())
        cfg = config_dict(
            tmp_path,
            assembly={"idle_s": 0.2},
            judge={
                "model": "openai/primary-judge",
                "fallbacks": ["openai/gpt-4o-mini"],
                "api_base": fake.base_url,
                "api_key": "k",
                "retries": 1,
                "retry_initial_s": 0.01,
            },
            scorers=[_binding("judge")],
        )
        daemon = DaemonProcess(tmp_path, cfg).start()
        try:
            with tracer(span_exporter("http", http_url=daemon.http_url)) as t:
                agent_trace(t, answer="down")
                agent_trace(t, answer="locked out")
            _scores(daemon, 2)
            rows = daemon.query_json(
                "SELECT r.output LIKE '%locked out%' AS locked, s.status, s.judge_model, s.judge_attempts, "
                "s.judge_cost_usd, s.error, r.trace_id FROM scores s JOIN runs r USING (run_id)"
            )
            explained = daemon.cli("explain", next(r["trace_id"] for r in rows if not r["locked"])).stdout
        finally:
            assert daemon.stop() == 0, daemon.log()
        models = [r.body.get("model") for r in fake.requests]

    by = {r["locked"]: r for r in rows}
    answered, refused = by[False], by[True]
    # the 503 was retried once on the primary, then the fallback answered
    assert answered["status"] == "ok" and answered["judge_model"] == "openai/gpt-4o-mini"
    assert answered["judge_attempts"] == 3 and answered["judge_cost_usd"] > 0
    assert "judged by fallback openai/gpt-4o-mini (not openai/primary-judge)" in explained, explained
    # a 401 is not transient: no fallback, the primary's error is the score's
    assert refused["status"] == "error" and refused["judge_model"] == "openai/primary-judge"
    assert "AuthenticationError" in refused["error"]
    assert models.count("gpt-4o-mini") == 1 and models.count("primary-judge") == 3
