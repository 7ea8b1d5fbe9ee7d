"""``judge.retries`` from the YAML (and per binding) through a real daemon to a fake provider
that fails on demand: transient errors (5xx, 429) are retried with the backoff, a 401 is not,
and each score records the attempts it took."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fakes.fake_openai import FakeOpenAI, RecordedRequest, Reply
from support.daemon import DaemonProcess, config_dict, wait_for
from support.otlp import agent_trace, span_exporter, tracer

VERDICT = Reply.json({"satisfied": True, "reasoning": "answered"})


def _asks(answer: str, criterion: str) -> Callable[[RecordedRequest], bool]:
    return lambda r: answer in r.prompt_text and criterion in r.prompt_text


def test_retries_from_the_judge_section_and_per_binding(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script("Criterion:", VERDICT)
        for criterion in ("default retries", "no retries"):
            fake.script(
                _asks("flaky", criterion), [Reply.server_error(503), Reply.rate_limited(retry_after_s=0), VERDICT]
            )
            fake.script(_asks("locked out", criterion), Reply.unauthorized())
        cfg = config_dict(
            tmp_path,
            assembly={"idle_s": 0.2},
            judge={
                "model": "openai/gpt-4o-mini",
                "api_base": fake.base_url,
                "api_key": "k",
                "retries": 2,
                "retry_initial_s": 0.05,
            },
            scorers=[
                {
                    "id": "judge-default",
                    "prebuilt": "multi_turn_judge",
                    "scope": "run",
                    "options": {"criterion": "default retries"},
                },
                {
                    "id": "judge-once",
                    "prebuilt": "multi_turn_judge",
                    "scope": "run",
                    "options": {"criterion": "no retries"},
                    "judge": {"retries": 0},
                },
            ],
            workers={"count": 0},  # the retries are the scorer's, wherever it runs: fewer processes
        )
        daemon = DaemonProcess(tmp_path, cfg).start()
        try:
            with tracer(span_exporter("http", http_url=daemon.http_url)) as t:
                agent_trace(t, answer="flaky")
                agent_trace(t, answer="locked out")
            sql = (
                "SELECT s.scorer_id, r.output LIKE '%flaky%' AS flaky, s.status, s.judge_attempts, s.error "
                "FROM scores s JOIN runs r USING (run_id) ORDER BY 1, 2"
            )
            wait_for(lambda: len(daemon.query_json(sql)) == 4, 60, interval_s=0.1, what="4 scores")
            rows = daemon.query_json(sql)
            calls = {
                (criterion, answer): fake.attempts(_asks(answer, criterion))
                for criterion in ("default retries", "no retries")
                for answer in ("flaky", "locked out")
            }
        finally:
            assert daemon.stop() == 0, daemon.log()
    by = {(r["scorer_id"], r["flaky"]): r for r in rows}
    # 503, 429, then the verdict: two retries, three attempts
    assert by[("judge-default", True)]["status"] == "ok" and by[("judge-default", True)]["judge_attempts"] == 3
    assert calls[("default retries", "flaky")] == 3
    # a 401 is not retried
    assert by[("judge-default", False)]["status"] == "error" and by[("judge-default", False)]["judge_attempts"] == 1
    assert "AuthenticationError" in by[("judge-default", False)]["error"]
    assert calls[("default retries", "locked out")] == 1
    # the binding's retries: 0 makes one attempt
    assert by[("judge-once", True)]["status"] == "error" and by[("judge-once", True)]["judge_attempts"] == 1
    assert calls[("no retries", "flaky")] == 1
