"""Scores by the other paths end to end through real processes: a new binding backfilled over
stored runs (offline and through the daemon), scores exported as evaluation spans into the scored
traces, and framework captures replayed and scored. (Live scoring: test_scoring_e2e.py.)"""

from __future__ import annotations

import pytest
from fakes.fake_openai import FakeOpenAI
from fakes.otlp_capture import OtlpCapture
from support.captures import CAPTURES
from support.daemon import DaemonProcess, wait_for
from support.scoring_e2e import (
    BAD,
    CRITERION,
    GOOD,
    NO_WORKERS,
    bindings,
    scores,
    scoring_config,
    script_judge,
    wait_scores,
)

from tracescorer.demo import emit_conversations

REPLAYED = {"conv-pyd-7", "sess-oi-42"}  # the conversations of the two captures replayed
EXPORTED = GOOD["id"]  # the one conversation the export test sends
# beside the live bindings: a conversation judge for every agent (the captures' too)
CONVERSATION_JUDGE = {
    "id": "conversation-judge",
    "prebuilt": "multi_turn_judge",
    "scope": "conversation",
    "options": {"criterion": CRITERION},
    "threshold": 1,
}


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield script_judge(server)


@pytest.fixture(scope="module")
def exporting(tmp_path_factory):
    """One daemon (as deployed, worker processes included) for the tests that only send and read,
    each on its own conversations: scores exported to an OTLP capture every 0.2 s."""
    tmp_path = tmp_path_factory.mktemp("exporting")
    with FakeOpenAI() as fake, OtlpCapture() as capture:
        script_judge(fake)
        cfg = scoring_config(tmp_path, fake, bindings([CONVERSATION_JUDGE]))
        cfg["export"] = {"enabled": True, "endpoint": capture.grpc_endpoint, "protocol": "grpc", "interval_s": 0.2}
        daemon = DaemonProcess(tmp_path, cfg).start()
        try:
            yield daemon, capture
        finally:
            assert daemon.stop() == 0, daemon.log()


def test_backfill_new_binding_over_stored_runs(tmp_path, fake):
    # backfill scores in the daemon's own runner (or the CLI's): no worker processes
    daemon = DaemonProcess(tmp_path, scoring_config(tmp_path, fake, bindings(), workers=NO_WORKERS)).start()
    emit_conversations(daemon.grpc_endpoint, [GOOD, BAD])
    wait_scores(daemon, 6, "scorer_id IN ('non-empty', 'no-tool-errors')")
    assert daemon.stop() == 0
    # a new scorer is bound after the traffic: backfill scores the stored runs
    new = {"id": "mentions-order", "prebuilt": "includes", "options": {"text": "order"}, "scope": "run", "threshold": 1}
    daemon = DaemonProcess(tmp_path, scoring_config(tmp_path, fake, bindings([new]), workers=NO_WORKERS))
    dry = daemon.cli("backfill", "--scorer", "mentions-order", "--since", "1d", "--dry-run")
    assert "would_score: 3" in dry.stdout
    assert scores(daemon, "scorer_id = 'mentions-order'") == []
    # offline (no daemon running): the CLI scores in-process
    out = daemon.cli("backfill", "--scorer", "mentions-order", "--since", "1d", "--filter", "agent_name=support-*")
    assert "scored: 3" in out.stdout
    rows = scores(daemon, "scorer_id = 'mentions-order'")
    assert len(rows) == 3 and {r["source"] for r in rows} == {"backfill"}
    # online: through the running daemon, re-scoring upserts the same ids
    daemon.start()
    try:
        out = daemon.cli("backfill", "--scorer", "mentions-order", "--since", "1d")
        assert "scored: 3" in out.stdout
        again = scores(daemon, "scorer_id = 'mentions-order'")
        assert sorted(r["id"] for r in again) == sorted(r["id"] for r in rows)
        bad = daemon.cli("backfill", "--scorer", "nope", check=False)
        assert bad.returncode != 0 and "not bound" in bad.stderr
    finally:
        assert daemon.stop() == 0, daemon.log()


def test_scores_exported_as_evaluation_spans_into_the_scored_traces(exporting):
    daemon, capture = exporting
    emit_conversations(daemon.grpc_endpoint, [GOOD])
    # 2 runs x 2 code scorers + the two conversation judges
    rows = wait_scores(daemon, 6, "conversation_id = 'conv-good'")
    ids = {r["id"] for r in rows}

    def exported() -> dict:
        spans = {s.attributes.get("tracescorer.score.id"): s for s in capture.spans()}
        return spans if ids <= spans.keys() else {}

    by_score = wait_for(exported, 30, interval_s=0.1, what="a span for each score of conv-good")
    runs = daemon.query_json(
        "SELECT run_id, trace_id, span_id FROM runs WHERE conversation_id = 'conv-good' ORDER BY started_at_unix_nano"
    )
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
    # run scores hang off their own agent span; the conversation scores off the last run's
    convs = [r for r in rows if r["entity_type"] == "conversation"]
    assert len(convs) == 2
    for conv in convs:
        assert (conv["run_id"], conv["trace_id"], conv["span_id"]) == (
            runs[-1]["run_id"],
            runs[-1]["trace_id"],
            runs[-1]["span_id"],
        )
        assert by_score[conv["id"]].attributes.get("tracescorer.judge.cost_usd", 0) > 0
    where = "conversation_id = 'conv-good'"
    assert wait_for(lambda: all(r["exported_at"] for r in scores(daemon, where)), 15, what="exported_at set")


def test_replayed_framework_captures_are_scored(exporting):
    daemon, _ = exporting
    for case in ("py-pydantic-ai-multiturn-tools", "py-openinference-openai-session-tools"):
        daemon.cli("replay", str(CAPTURES / case), "--endpoint", daemon.http_url)
    replayed = f"conversation_id IS DISTINCT FROM '{EXPORTED}'"  # all but the export test's
    runs = wait_for(
        lambda: (lambda r: r if len(r) == 5 else None)(daemon.query_json(f"SELECT run_id FROM runs WHERE {replayed}")),
        30,
        interval_s=0.25,
        what="5 runs from the two captures",
    )
    rows = wait_scores(daemon, 5 + 2, f"{replayed} AND scorer_id IN ('non-empty', 'conversation-judge')")
    run_scores = [r for r in rows if r["scorer_id"] == "non-empty"]
    assert {r["run_id"] for r in run_scores} == {r["run_id"] for r in runs}
    assert all(r["status"] == "ok" and r["label"] == "pass" for r in run_scores)
    conv = {r["conversation_id"]: r for r in rows if r["scorer_id"] == "conversation-judge"}
    assert set(conv) == REPLAYED
    assert all(r["status"] == "ok" and r["score"] == 1.0 for r in conv.values())
