"""Batch mode through a real daemon killed with -9 while its batch is in flight: the restarted
daemon's recovery scores the run from the same provider batch (polled, not submitted again), the
score is stored once, at the batch price (gpt-4o-mini's batch rates in litellm's price map)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from fakes.fake_openai import FakeOpenAI, Reply
from support.daemon import DaemonProcess, config_dict, wait_for
from support.otlp import agent_trace, span_exporter, tracer

SCORES = "SELECT status, judge_cost_usd, judge_attempts, metadata FROM scores WHERE scorer_id = 'batched'"
DECISIONS = "SELECT decision FROM scoring_decisions WHERE scorer_id = 'batched'"


def _config(tmp_path: Path, fake: FakeOpenAI) -> dict[str, Any]:
    return config_dict(
        tmp_path,
        assembly={"idle_s": 0.2},
        judge={
            "model": "openai/gpt-4o-mini",
            "api_base": fake.base_url,
            "api_key": "k",
            "retries": 0,
            "batch": {"collect_s": 0.2, "poll_s": 0.1},
        },
        scorers=[
            {
                "id": "batched",
                "prebuilt": "multi_turn_judge",
                "options": {"criterion": "The agent answered"},
                "mode": "batch",
            }
        ],
    )


def test_a_batch_in_flight_across_kill_9_is_polled_not_resubmitted_and_scored_once(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script("Criterion:", Reply.json({"satisfied": True, "reasoning": "answered"}))
        fake.batches.hold = True
        daemon = DaemonProcess(tmp_path, _config(tmp_path, fake)).start()
        try:
            with tracer(span_exporter("http", http_url=daemon.http_url)) as t:
                agent_trace(t, answer="Sunny, 22C")
            wait_for(lambda: fake.batches.polls.get("batch_1", 0) >= 1 or None, 60, what="the batch polled")
        finally:
            assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL

        fake.batches.hold = False
        daemon = DaemonProcess(tmp_path, _config(tmp_path, fake)).start()
        try:
            rows = wait_for(lambda: daemon.query_json(SCORES) or None, 60, interval_s=0.1, what="the score")
            decisions = daemon.query_json(DECISIONS)
            batches = daemon.query_json("SELECT status, provider_batch_id FROM judge_batches")
        finally:
            assert daemon.stop() == 0, daemon.log()
        assert fake.batches.created == 1, "the batch was submitted once"
        assert fake.batches.polls["batch_1"] >= 2  # before the kill, and after the restart
        assert fake.attempts() == 1, "one batch line answered; no live request"
    [row] = rows
    assert [d["decision"] for d in decisions] == ["scored"]
    assert batches == [{"status": "closed", "provider_batch_id": "batch_1"}]
    call = json.loads(row["metadata"])["judge_calls"][0]
    batch_price = call["input_tokens"] * 0.075e-6 + call["output_tokens"] * 0.3e-6  # half of 0.15 / 0.6 per 1M
    assert row["status"] == "ok" and row["judge_attempts"] == 1
    assert abs(row["judge_cost_usd"] - batch_price) < 1e-12, (row, call)
