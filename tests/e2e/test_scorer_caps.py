"""Per-scorer caps through the daemon with the fake judge: a binding's daily budget and its
requests per minute stop that binding alone, and the refusal names the cap in its decision and in
`explain`."""

from __future__ import annotations

from fakes.fake_openai import FakeOpenAI, Reply
from support.daemon import DaemonProcess, config_dict, wait_for

from tracescorer.demo import emit_conversations


def _judge(binding_id: str, **limits: float) -> dict:
    binding = {
        "id": binding_id,
        "prebuilt": "multi_turn_judge",
        "scope": "conversation",
        "options": {"criterion": f"The agent answered ({binding_id})"},
        "threshold": 1,
    }
    return {**binding, "limits": limits} if limits else binding


def _conversation(i: int) -> dict:
    return {"id": f"conv-{i}", "agent": "support", "turns": [(f"Question {i}?", None, None, None, f"Answer {i}.")]}


def test_a_per_scorer_cap_stops_that_scorer_alone(tmp_path):
    with FakeOpenAI() as fake:
        fake.script("Criterion:", Reply.json({"satisfied": True, "reasoning": "answered"}))
        cfg = config_dict(
            tmp_path,
            assembly={"idle_s": 0.3, "conversation_idle_s": 0.5},
            judge={"model": "openai/gpt-4o-mini", "api_base": fake.base_url, "api_key": "k", "timeout_s": 10},
            scorers=[
                _judge("free-judge"),
                _judge("budget-judge", daily_budget_usd=1e-9),
                _judge("rate-judge", requests_per_minute=1),
            ],
            workers={"count": 0},  # the caps are the daemon's runner's (conversations are scored there)
        )
        daemon = DaemonProcess(tmp_path, cfg).start()
        try:
            emit_conversations(daemon.grpc_endpoint, [_conversation(1)])
            first = wait_for(
                lambda: (lambda rows: rows if len(rows) == 3 else None)(
                    daemon.query_json("SELECT scorer_id, status, judge_cost_usd FROM scores")
                ),
                30,
                interval_s=0.2,
                what="conv-1 scored by every judge",
            )
            assert {r["status"] for r in first} == {"ok"} and all(r["judge_cost_usd"] > 1e-9 for r in first)
            emit_conversations(daemon.grpc_endpoint, [_conversation(2), _conversation(3)])
            decisions = wait_for(
                lambda: (lambda rows: rows if len(rows) == 9 else None)(
                    daemon.query_json("SELECT scorer_id, target_id, decision, detail FROM scoring_decisions")
                ),
                30,
                interval_s=0.2,
                what="9 decisions",
            )
            by = {(d["scorer_id"], d["target_id"]): d for d in decisions}
            for conv in ("conv-2", "conv-3"):
                assert by[("free-judge", conv)]["decision"] == "scored"  # no cap: goes on
                budget = by[("budget-judge", conv)]
                assert budget["decision"] == "budget_exhausted"
                assert budget["detail"].startswith("scorers[budget-judge].limits.daily_budget_usd reached: $")
            rated = sorted(by[("rate-judge", c)]["decision"] for c in ("conv-2", "conv-3"))
            assert rated == ["rate_limited", "rate_limited"]  # its one request a minute went to conv-1
            assert "scorers[rate-judge].limits.requests_per_minute=1 reached" in by[("rate-judge", "conv-2")]["detail"]
            assert fake.attempts("(budget-judge)") == 1 and fake.attempts("(rate-judge)") == 1
            assert fake.attempts("(free-judge)") == 3

            explain = daemon.cli("explain", "--conversation", "conv-2").stdout
            assert "budget-judge: budget_exhausted — scorers[budget-judge].limits.daily_budget_usd reached" in explain
            assert "rate-judge: rate_limited — scorers[rate-judge].limits.requests_per_minute=1 reached" in explain
            assert "free-judge: scored 1.0" in explain
        finally:
            assert daemon.stop() == 0, daemon.log()
        # after a restart the spend is read back: the budget stays spent today
        daemon.start()
        try:
            emit_conversations(daemon.grpc_endpoint, [_conversation(4)])
            d = wait_for(
                lambda: daemon.query_json(
                    "SELECT decision FROM scoring_decisions WHERE scorer_id = 'budget-judge' AND target_id = 'conv-4'"
                ),
                30,
                interval_s=0.2,
                what="conv-4 decided",
            )[0]
            assert d["decision"] == "budget_exhausted"
        finally:
            assert daemon.stop() == 0, daemon.log()
