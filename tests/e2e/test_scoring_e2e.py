"""Online scoring end to end through real processes: OTel SDK traffic -> `tracescorer serve` ->
scores in DuckDB, with the judge as the tests' fake OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest
from fakes.fake_openai import FakeOpenAI, Reply
from support.daemon import DaemonProcess, config_dict, wait_for

from tracescorer.demo import emit_conversations

pytestmark = pytest.mark.slow  # each test runs a daemon with a judge through whole conversations

CRITERION = "The agent answered every question"
GOOD = {
    "id": "conv-good",
    "agent": "support-alpha",
    "turns": [
        ("Where is my order 7?", "track_order", {"order": 7}, "in transit", "Order 7 is in transit, arriving Friday."),
        ("Can I change the address?", None, None, None, "Yes, I changed the address for order 7."),
    ],
}
BAD = {
    "id": "conv-bad",
    "agent": "support-alpha",
    "turns": [
        (
            "Refund order 9 please",
            "refund",
            {"order": 9},
            "ERROR: payment provider down",
            "The refund did not go through.",
        ),
    ],
}
OUTAGE = {
    "id": "conv-outage",
    "agent": "support-alpha",
    "turns": [
        ("JUDGE_OUTAGE trigger question", None, None, None, "An answer the judge cannot grade (JUDGE_OUTAGE)."),
    ],
}
BILLING = {
    "id": "conv-billing",
    "agent": "billing-bot",
    "turns": [
        ("What is my balance?", None, None, None, "Your balance is 12 EUR."),
    ],
}


def _judge(fake: FakeOpenAI) -> dict:
    return {"model": "openai/gpt-4o-mini", "api_base": fake.base_url, "api_key": "test-key", "timeout_s": 10}


def _bindings(extra: list[dict] | None = None) -> list[dict]:
    return [
        {"id": "non-empty", "prebuilt": "non_empty_response", "scope": "run", "threshold": 1},
        {"id": "no-tool-errors", "prebuilt": "no_tool_errors", "scope": "run", "threshold": 1},
        {
            "id": "multi-turn-judge-scorer",
            "prebuilt": "multi_turn_judge",
            "scope": "conversation",
            "options": {"criterion": CRITERION},
            "threshold": 1,
            "filter": {"agent_name": "support-*"},
        },
        {"id": "never-sampled", "prebuilt": "non_empty_response", "scope": "run", "sampling": {"ratio": 0.0}},
        *(extra or []),
    ]


def _cfg(tmp_path, fake, bindings, **judge_extra):
    return config_dict(
        tmp_path,
        assembly={"idle_s": 0.3, "conversation_idle_s": 1.0},
        judge={**_judge(fake), **judge_extra},
        scorers=bindings,
    )


def _scores(daemon, where="TRUE") -> list[dict]:
    return daemon.query_json(f"SELECT * FROM scores WHERE {where} ORDER BY scorer_id, conversation_id, run_id")


def _decisions(daemon, where="TRUE") -> list[dict]:
    return daemon.query_json(f"SELECT * FROM scoring_decisions WHERE {where} ORDER BY scorer_id, target_id")


def _wait_scores(daemon, n, where="TRUE", timeout_s=30):
    return wait_for(
        lambda: (lambda rows: rows if len(rows) >= n else None)(_scores(daemon, where)),
        timeout_s,
        interval_s=0.25,
        what=f"{n} scores where {where}",
    )


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        server.script("Criterion:", Reply.json({"satisfied": True, "reasoning": "all answered"}))
        server.script("did not go through", Reply.json({"satisfied": False, "reasoning": "refund failed"}))
        server.script("JUDGE_OUTAGE", Reply.server_error(500))
        yield server


def test_live_scoring_decisions_outage_restart_and_late_turn(tmp_path, fake):
    daemon = DaemonProcess(tmp_path, _cfg(tmp_path, fake, _bindings())).start()
    try:
        emit_conversations(daemon.grpc_endpoint, [GOOD, BAD, OUTAGE, BILLING], service_name="e2e-agents")
        # 5 runs x 2 code scorers + 3 support conversations judged (billing is filtered out)
        rows = _wait_scores(daemon, 13)
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

        decisions = _decisions(daemon)
        kinds = {(d["scorer_id"], d["target_id"]): d for d in decisions}
        assert all(d["decision"] == "sampled_out" for d in decisions if d["scorer_id"] == "never-sampled")
        assert len([d for d in decisions if d["scorer_id"] == "never-sampled"]) == 5
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
        count_before = len(_scores(daemon))
    finally:
        assert daemon.stop() == 0, daemon.log()

    # restart: nothing is scored twice, ids are stable
    daemon.start()
    try:
        assert len(_scores(daemon)) == count_before
        # a late turn in conv-good re-scores the conversation under the same score id
        late = {
            "id": "conv-good",
            "agent": "support-alpha",
            "turns": [("And the delivery date?", None, None, None, "Delivery is on Friday.")],
        }
        emit_conversations(daemon.grpc_endpoint, [late], service_name="e2e-agents")

        def rescored():
            row = _scores(daemon, "scorer_id = 'multi-turn-judge-scorer' AND conversation_id = 'conv-good'")
            return row if row and row[0]["updated_at"] != first_good["updated_at"] else None

        row = wait_for(rescored, 30, interval_s=0.25, what="conversation re-scored")[0]
        assert row["id"] == first_good["id"]
        assert len(json.loads(row["metadata"])["run_ids"]) == 3
        assert len(_scores(daemon, "scorer_id = 'multi-turn-judge-scorer'")) == 3
    finally:
        assert daemon.stop() == 0, daemon.log()


def test_budget_exhausted_pauses_judges_but_code_scorers_continue(tmp_path, fake):
    cfg = _cfg(tmp_path, fake, _bindings(), daily_budget_usd=1e-9)
    daemon = DaemonProcess(tmp_path, cfg).start()
    try:
        first = {"id": "conv-b1", "agent": "support-alpha", "turns": [("Q1?", None, None, None, "A1.")]}
        emit_conversations(daemon.grpc_endpoint, [first])
        _wait_scores(daemon, 1, "scorer_id = 'multi-turn-judge-scorer'")
        spent = _scores(daemon, "scorer_id = 'multi-turn-judge-scorer'")[0]
        assert spent["judge_cost_usd"] and spent["judge_cost_usd"] > 1e-9  # litellm priced gpt-4o-mini usage
        second = {"id": "conv-b2", "agent": "support-alpha", "turns": [("Q2?", None, None, None, "A2.")]}
        emit_conversations(daemon.grpc_endpoint, [second])
        d = wait_for(
            lambda: _decisions(daemon, "target_id = 'conv-b2' AND scorer_id = 'multi-turn-judge-scorer'"),
            30,
            interval_s=0.25,
            what="budget decision",
        )[0]
        assert d["decision"] == "budget_exhausted" and "budget" in d["detail"]
        _wait_scores(daemon, 2, "scorer_id = 'non-empty'")  # code scorers kept scoring
        assert len(_scores(daemon, "scorer_id = 'non-empty'")) == 2
        assert fake.attempts("Q2") == 0 and fake.attempts("A2.") == 0
    finally:
        assert daemon.stop() == 0, daemon.log()


def test_backfill_new_binding_over_stored_runs(tmp_path, fake):
    daemon = DaemonProcess(tmp_path, _cfg(tmp_path, fake, _bindings())).start()
    emit_conversations(daemon.grpc_endpoint, [GOOD, BAD])
    _wait_scores(daemon, 6, "scorer_id IN ('non-empty', 'no-tool-errors')")
    assert daemon.stop() == 0
    # a new scorer is bound after the traffic: backfill scores the stored runs
    new = {"id": "mentions-order", "prebuilt": "includes", "options": {"text": "order"}, "scope": "run", "threshold": 1}
    daemon = DaemonProcess(tmp_path, _cfg(tmp_path, fake, _bindings([new])))
    dry = daemon.cli("backfill", "--scorer", "mentions-order", "--since", "1d", "--dry-run")
    assert "would_score: 3" in dry.stdout
    assert _scores(daemon, "scorer_id = 'mentions-order'") == []
    # offline (no daemon running): the CLI scores in-process
    out = daemon.cli("backfill", "--scorer", "mentions-order", "--since", "1d", "--filter", "agent_name=support-*")
    assert "scored: 3" in out.stdout
    rows = _scores(daemon, "scorer_id = 'mentions-order'")
    assert len(rows) == 3 and {r["source"] for r in rows} == {"backfill"}
    # online: through the running daemon, re-scoring upserts the same ids
    daemon.start()
    try:
        out = daemon.cli("backfill", "--scorer", "mentions-order", "--since", "1d")
        assert "scored: 3" in out.stdout
        again = _scores(daemon, "scorer_id = 'mentions-order'")
        assert sorted(r["id"] for r in again) == sorted(r["id"] for r in rows)
        bad = daemon.cli("backfill", "--scorer", "nope", check=False)
        assert bad.returncode != 0 and "not bound" in bad.stderr
    finally:
        assert daemon.stop() == 0, daemon.log()


def test_scores_exported_as_evaluation_spans_into_the_scored_traces(tmp_path, fake):
    from fakes.otlp_capture import OtlpCapture

    with OtlpCapture() as capture:
        cfg = _cfg(tmp_path, fake, _bindings())
        cfg["export"] = {"enabled": True, "endpoint": capture.grpc_endpoint, "protocol": "grpc", "interval_s": 0.2}
        daemon = DaemonProcess(tmp_path, cfg).start()
        try:
            emit_conversations(daemon.grpc_endpoint, [GOOD])
            rows = _wait_scores(daemon, 5)  # 2 runs x 2 code scorers + the conversation judge
            spans = capture.wait_for_spans(5, timeout_s=30)
            runs = daemon.query_json("SELECT run_id, trace_id, span_id FROM runs ORDER BY started_at_unix_nano")
            by_score = {s.attributes["tracescorer.score.id"]: s for s in spans}
            for row in rows:
                span = by_score[row["id"]]
                assert span.name == f"evaluate {row['scorer_id']}"
                assert (span.trace_id, span.parent_span_id) == (row["trace_id"], row["span_id"])
                assert [(link.trace_id, link.span_id) for link in span.links] == [(row["trace_id"], row["span_id"])]
                attrs = span.attributes
                assert attrs["gen_ai.evaluation.name"] == row["scorer_id"]
                assert attrs["gen_ai.evaluation.score.value"] == row["score"]
                assert attrs["gen_ai.evaluation.score.label"] == row["label"]
                assert attrs["gen_ai.evaluation.explanation"] == row["reason"]
                assert attrs["gen_ai.conversation.id"] == "conv-good"
                assert attrs["tracescorer.scorer.id"] == row["scorer_id"]
                assert attrs["tracescorer.run.id"] == row["run_id"]
                assert [e.name for e in span.events] == ["gen_ai.evaluation.result"]
                assert span.events[0].attributes["gen_ai.evaluation.score.value"] == row["score"]
            # run scores hang off their own agent span; the conversation score off the last run's
            conv = next(r for r in rows if r["entity_type"] == "conversation")
            assert (conv["run_id"], conv["trace_id"], conv["span_id"]) == (
                runs[-1]["run_id"],
                runs[-1]["trace_id"],
                runs[-1]["span_id"],
            )
            assert by_score[conv["id"]].attributes.get("tracescorer.judge.cost_usd", 0) > 0
            exported = wait_for(lambda: all(r["exported_at"] for r in _scores(daemon)), 15, what="exported_at set")
            assert exported
        finally:
            assert daemon.stop() == 0, daemon.log()


def test_replayed_framework_captures_are_scored(tmp_path, fake):
    from support.captures import CAPTURES

    bindings = [
        {"id": "non-empty", "prebuilt": "non_empty_response", "scope": "run", "threshold": 1},
        {
            "id": "conversation-judge",
            "prebuilt": "multi_turn_judge",
            "scope": "conversation",
            "options": {"criterion": CRITERION},
            "threshold": 1,
        },
    ]
    daemon = DaemonProcess(tmp_path, _cfg(tmp_path, fake, bindings)).start()
    try:
        cases = ["py-pydantic-ai-multiturn-tools", "py-openinference-openai-session-tools"]
        for case in cases:
            daemon.cli("replay", str(CAPTURES / case), "--endpoint", daemon.http_url)
        runs = wait_for(
            lambda: (lambda r: r if len(r) == 5 else None)(daemon.query_json("SELECT run_id FROM runs")),
            30,
            interval_s=0.25,
            what="5 runs from the two captures",
        )
        rows = _wait_scores(daemon, 5 + 2)
        run_scores = [r for r in rows if r["scorer_id"] == "non-empty"]
        assert {r["run_id"] for r in run_scores} == {r["run_id"] for r in runs}
        assert all(r["status"] == "ok" and r["label"] == "pass" for r in run_scores)
        conv = {r["conversation_id"]: r for r in rows if r["scorer_id"] == "conversation-judge"}
        assert set(conv) == {"conv-pyd-7", "sess-oi-42"}
        assert all(r["status"] == "ok" and r["score"] == 1.0 for r in conv.values())
    finally:
        assert daemon.stop() == 0, daemon.log()
