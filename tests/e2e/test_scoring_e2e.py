"""Live online scoring end to end through real processes: OTel SDK traffic -> `tracescorer serve`
-> scores in DuckDB, with the judge as the tests' fake OpenAI-compatible server: decisions, a judge
outage, a restart, a late turn, a spent budget. (Backfill, export and replay:
test_scoring_paths_e2e.py.)"""

from __future__ import annotations

import json

import pytest
from fakes.fake_openai import FakeOpenAI
from support.daemon import DaemonProcess, wait_for
from support.scoring_e2e import (
    BAD,
    BILLING,
    GOOD,
    NO_WORKERS,
    OUTAGE,
    bindings,
    decisions,
    scores,
    scoring_config,
    script_judge,
    wait_scores,
)

from tracescorer.demo import emit_conversations


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield script_judge(server)


def test_live_scoring_decisions_outage_restart_and_late_turn(tmp_path, fake):
    # the runner's decisions in the daemon's own process (worker processes score as deployed in
    # test_scoring_paths_e2e.py's exporting daemon, test_judge_heal.py and test_shutdown_grace.py)
    cfg = scoring_config(tmp_path, fake, bindings(), workers=NO_WORKERS)
    daemon = DaemonProcess(tmp_path, cfg).start()
    try:
        emit_conversations(daemon.grpc_endpoint, [GOOD, BAD, OUTAGE, BILLING], service_name="e2e-agents")
        # 5 runs x 2 code scorers + 3 support conversations judged (billing is filtered out)
        rows = wait_scores(daemon, 13)
        by = {(r["scorer_id"], r["conversation_id"], r["run_id"]): r for r in rows}
        judged = {r["conversation_id"]: r for r in rows if r["scorer_id"] == "multi-turn-judge-scorer"}
        assert judged["conv-good"]["status"] == "ok" and judged["conv-good"]["score"] == 1.0
        assert judged["conv-good"]["label"] == "pass" and judged["conv-good"]["entity_type"] == "conversation"
        assert judged["conv-bad"]["score"] == 0.0 and judged["conv-bad"]["label"] == "fail"
        assert "Not satisfied" in judged["conv-bad"]["reason"] and "refund failed" in judged["conv-bad"]["reason"]
        # judge outage: an error row, while code scorers scored the same run
        outage = judged["conv-outage"]
        assert outage["status"] == "error" and outage["score"] is None and "InternalServerError" in outage["error"]
        assert outage["error_type"] and outage["judge_attempts"] >= 1
        outage_runs = [r for k, r in by.items() if k[1] == "conv-outage" and k[0] != "multi-turn-judge-scorer"]
        assert {r["status"] for r in outage_runs} == {"ok"} and len(outage_runs) == 2
        tool_errors = [r for r in rows if r["scorer_id"] == "no-tool-errors" and r["conversation_id"] == "conv-bad"]
        assert tool_errors[0]["score"] == 0.0 and tool_errors[0]["label"] == "fail"
        # the judge saw the assistant turns of the whole conversation, fenced
        good_prompt = next(r.prompt_text for r in fake.requests if "changed the address" in r.prompt_text)
        assert "Order 7 is in transit" in good_prompt and "BEGIN_UNTRUSTED" in good_prompt
        assert "Where is my order 7?" not in good_prompt  # user turns are not shown to the judge

        decided = decisions(daemon)
        kinds = {(d["scorer_id"], d["target_id"]): d for d in decided}
        assert all(d["decision"] == "sampled_out" for d in decided if d["scorer_id"] == "never-sampled")
        assert len([d for d in decided if d["scorer_id"] == "never-sampled"]) == 5
        billing = kinds[("multi-turn-judge-scorer", "conv-billing")]
        assert billing["decision"] == "filtered_out" and "billing-bot" in billing["detail"]
        assert kinds[("multi-turn-judge-scorer", "conv-outage")]["decision"] == "failed"

        explain = daemon.cli("explain", "--conversation", "conv-billing").stdout
        assert "multi-turn-judge-scorer: filtered_out" in explain
        trace = by[("non-empty", "conv-good", next(k[2] for k in by if k[1] == "conv-good"))]["trace_id"]
        explain = daemon.cli("explain", trace).stdout
        assert "non-empty: scored 1.0 label=pass" in explain and "never-sampled: sampled_out" in explain

        scores_out = daemon.cli("scores", "--scorer", "multi-turn-judge-scorer").stdout
        assert "conv-good" in scores_out and "conv-bad" in scores_out
        import urllib.request

        metrics = urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10).read().decode()
        assert (
            'tracescorer_scoring_decisions_total{decision="filtered_out",scorer="multi-turn-judge-scorer"} 1.0'
            in metrics
        )
        from prometheus_client.parser import text_string_to_metric_families

        errors = [
            sample.value
            for family in text_string_to_metric_families(metrics)
            for sample in family.samples
            if sample.name == "tracescorer_score_results_total"
            and sample.labels["scorer"] == "multi-turn-judge-scorer"
            and sample.labels["status"] == "error"
        ]
        assert sum(errors) == 1.0
        first_good = judged["conv-good"]
        count_before = len(scores(daemon))
    finally:
        assert daemon.stop() == 0, daemon.log()

    # restart: nothing is scored twice, ids are stable
    daemon.start()
    try:
        assert len(scores(daemon)) == count_before
        # a late turn in conv-good re-scores the conversation under the same score id
        late = {
            "id": "conv-good",
            "agent": "support-alpha",
            "turns": [("And the delivery date?", None, None, None, "Delivery is on Friday.")],
        }
        emit_conversations(daemon.grpc_endpoint, [late], service_name="e2e-agents")

        def rescored():
            row = scores(daemon, "scorer_id = 'multi-turn-judge-scorer' AND conversation_id = 'conv-good'")
            return row if row and row[0]["updated_at"] != first_good["updated_at"] else None

        row = wait_for(rescored, 30, interval_s=0.25, what="conversation re-scored")[0]
        assert row["id"] == first_good["id"]
        assert len(json.loads(row["metadata"])["run_ids"]) == 3
        assert len(scores(daemon, "scorer_id = 'multi-turn-judge-scorer'")) == 3
    finally:
        assert daemon.stop() == 0, daemon.log()


def test_budget_exhausted_pauses_judges_but_code_scorers_continue(tmp_path, fake):
    # the judge's budget is the daemon's runner's (conversations are scored there): no worker processes
    cfg = scoring_config(tmp_path, fake, bindings(), judge={"daily_budget_usd": 1e-9}, workers=NO_WORKERS)
    daemon = DaemonProcess(tmp_path, cfg).start()
    try:
        first = {"id": "conv-b1", "agent": "support-alpha", "turns": [("Q1?", None, None, None, "A1.")]}
        emit_conversations(daemon.grpc_endpoint, [first])
        wait_scores(daemon, 1, "scorer_id = 'multi-turn-judge-scorer'")
        spent = scores(daemon, "scorer_id = 'multi-turn-judge-scorer'")[0]
        assert spent["judge_cost_usd"] and spent["judge_cost_usd"] > 1e-9  # litellm priced gpt-4o-mini usage
        second = {"id": "conv-b2", "agent": "support-alpha", "turns": [("Q2?", None, None, None, "A2.")]}
        emit_conversations(daemon.grpc_endpoint, [second])
        d = wait_for(
            lambda: decisions(daemon, "target_id = 'conv-b2' AND scorer_id = 'multi-turn-judge-scorer'"),
            30,
            interval_s=0.25,
            what="budget decision",
        )[0]
        assert d["decision"] == "budget_exhausted" and "budget" in d["detail"]
        wait_scores(daemon, 2, "scorer_id = 'non-empty'")  # code scorers kept scoring
        assert len(scores(daemon, "scorer_id = 'non-empty'")) == 2
        assert fake.attempts("Q2") == 0 and fake.attempts("A2.") == 0
    finally:
        assert daemon.stop() == 0, daemon.log()
