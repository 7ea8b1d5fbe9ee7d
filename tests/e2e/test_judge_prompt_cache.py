"""Provider prompt caching through a real daemon: OTLP traces from the SDK exporter, a multi-turn
judge binding with a long rubric, Claude on the fake Anthropic Messages server.

Every judge request marks its static prefix (the rubric) ``cache_control``; the first run's request
writes the cache, later ones read it. The score stores the cached tokens (metadata ``judge_calls``)
and the cost litellm prices for that usage (reads at a tenth of the input price, the write at
1.25x), and the daily budget counts that cost, not the input price: after a restart with a budget
just above what two runs really cost, a third run is still judged, a fourth is not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the price map litellm ships, as the daemon

import litellm
import pytest
from fakes.fake_anthropic import FakeAnthropic
from fakes.fake_openai import Reply
from support.daemon import DaemonProcess, config_dict, wait_for
from support.otlp import agent_trace, span_exporter, tracer

MODEL = "anthropic/claude-haiku-4-5"
RUBRIC = "Judge like a support lead. " + "A helpful answer names the forecast and its source. " * 110
SCORES = (
    "SELECT s.status, s.judge_cost_usd, s.metadata, r.output FROM scores s JOIN runs r USING (run_id) "
    "ORDER BY s.created_at"
)


def _config(tmp_path: Path, fake: FakeAnthropic, budget: float | None = None) -> dict[str, Any]:
    binding = {
        "id": "helpful",
        "prebuilt": "multi_turn_judge",
        "scope": "run",
        "options": {"criterion": "The agent gave a forecast", "instructions": RUBRIC},
    }
    judge = {"model": MODEL, "api_base": fake.url, "api_key": "k", "retries": 0, "daily_budget_usd": budget}
    # one worker: its budget knows every run's spend at once (workers share theirs every few seconds)
    return config_dict(tmp_path, assembly={"idle_s": 0.2}, judge=judge, scorers=[binding], workers={"count": 0})


def _scored(daemon: DaemonProcess, answer: str, count: int) -> list[dict[str, Any]]:
    with tracer(span_exporter("http", http_url=daemon.http_url)) as t:
        agent_trace(t, answer=answer)
    return wait_for(
        lambda: (lambda rows: rows if len(rows) == count else None)(daemon.query_json(SCORES)),
        60,
        interval_s=0.1,
        what=f"{count} scores",
    )


def _billed(call: dict[str, Any]) -> float:
    info = litellm.get_model_info(MODEL)
    read, written = call.get("cached_tokens", 0), call.get("cache_write_tokens", 0)
    return (
        (call["input_tokens"] - read - written) * info["input_cost_per_token"]
        + read * info["cache_read_input_token_cost"]
        + written * info["cache_creation_input_token_cost"]
        + call["output_tokens"] * info["output_cost_per_token"]
    )


def test_cached_prefixes_are_stored_priced_and_counted_by_the_budget(tmp_path: Path) -> None:
    with FakeAnthropic(default=Reply.json({"satisfied": True, "reasoning": "a forecast"})) as fake:
        daemon = DaemonProcess(tmp_path, _config(tmp_path, fake)).start()
        try:
            _scored(daemon, "Sunny, 22C", 1)
            rows = _scored(daemon, "Rain, 14C", 2)
            tokens = {
                d: daemon.metric(f'tracescorer_judge_tokens_total{{direction="{d}"}} ')
                for d in ("cached_input", "cache_write")
            }
        finally:
            assert daemon.stop() == 0, daemon.log()
        first, second = (json.loads(r["metadata"])["judge_calls"][0] for r in rows)
        systems = [json.dumps(r.body["system"]) for r in fake.requests]
        assert systems[0] == systems[1] and '"cache_control": {"type": "ephemeral"}' in systems[0]
        assert RUBRIC in systems[0] and "Sunny" not in systems[0]
        assert first["cache_write_tokens"] > 1024 and "cached_tokens" not in first
        assert second["cached_tokens"] == first["cache_write_tokens"] and "cache_write_tokens" not in second
        assert tokens == {"cached_input": second["cached_tokens"], "cache_write": first["cache_write_tokens"]}
        for row, call in zip(rows, (first, second), strict=True):
            assert row["status"] == "ok" and row["judge_cost_usd"] == call["cost_usd"]
            assert call["cost_usd"] == pytest.approx(_billed(call), rel=1e-9)
        naive = second["input_tokens"] * litellm.get_model_info(MODEL)["input_cost_per_token"]
        spent = rows[0]["judge_cost_usd"] + rows[1]["judge_cost_usd"]
        assert rows[1]["judge_cost_usd"] < naive / 3

        # a budget between the real spend of two runs and of three: the input
        # price would have spent it (2 x naive > budget) before the third run
        budget = spent + rows[1]["judge_cost_usd"] / 2
        assert 2 * naive > budget
        daemon = DaemonProcess(tmp_path, _config(tmp_path, fake, budget)).start()
        try:
            third = _scored(daemon, "Snow, -2C", 3)[2]
            with tracer(span_exporter("http", http_url=daemon.http_url)) as t:
                agent_trace(t, answer="Fog, 8C")
            refused = wait_for(
                lambda: daemon.query_json("SELECT detail FROM scoring_decisions WHERE decision = 'budget_exhausted'"),
                60,
                interval_s=0.1,
                what="the fourth run refused for the budget",
            )
        finally:
            assert daemon.stop() == 0, daemon.log()
        assert third["status"] == "ok" and json.loads(third["metadata"])["judge_calls"][0]["cached_tokens"] > 1024
        assert len(refused) == 1 and len(fake.requests) == 3
