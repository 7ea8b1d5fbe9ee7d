"""A fleet mid-upgrade: one agent's turns of one conversation arrive in the old GenAI form (semantic
conventions 1.36, per-message events as OTLP log records) from a service not upgraded yet, and in
the new form (opentelemetry-util-genai: INTERNAL ``invoke_agent``, ``invoke_workflow``, ``plan``,
messages as JSON on spans) from an upgraded one — once with an old-form OpenAI instrumentation
below the new-form agent in the same trace, once with the content structured on the inference
event only. The SDK's own OTLP exporters (gRPC and HTTP) send
them to a real daemon; the runs are read back through ``tracescorer runs``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.daemon import DaemonProcess, config_dict
from support.genai_forms import ARGS, MODEL, RESULT, SYSTEM, TOOL, new_form_turn, old_form_turn, workflow
from support.live import Telemetry, daemon_runs, final_text, texts, wait_runs

AGENT, CONVERSATION = "weather", "conv-fleet"
Q1, A1 = "What is the weather in Paris?", "Sunny, 22C in Paris."
Q2, A2 = "And tomorrow?", "Rain tomorrow."
Q3, A3 = "Do I need an umbrella?", "Yes, take one."
Q4, A4 = "And a coat?", "A light one."


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    tmp = tmp_path_factory.mktemp("fleet")
    proc = DaemonProcess(tmp, config_dict(tmp, assembly={"idle_s": 0.3})).start()
    try:
        yield proc
    finally:
        proc.stop()


def test_one_agent_in_the_old_and_the_new_form_gives_one_conversation(
    daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    old = Telemetry(daemon, "weather-v1", transport="grpc")
    new = Telemetry(daemon, "weather-v2", transport="http")
    try:
        old_form_turn(
            old.tracer_provider, old.logger_provider, agent=AGENT, conversation_id=CONVERSATION, question=Q1, answer=A1
        )
        with workflow(new.tracer_provider, new.logger_provider, "trip_planner"):
            new_form_turn(
                new.tracer_provider,
                new.logger_provider,
                agent=AGENT,
                conversation_id=CONVERSATION,
                question=Q2,
                answer=A2,
                history=[("user", Q1), ("assistant", A1)],
            )
        new_form_turn(
            new.tracer_provider,
            new.logger_provider,
            agent=AGENT,
            conversation_id=CONVERSATION,
            question=Q3,
            answer=A3,
            history=[("user", Q1), ("assistant", A1), ("user", Q2), ("assistant", A2)],
            old_chats=True,
        )
        # content on the inference event only, structured (log records' AnyValue maps and lists)
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "EVENT_ONLY")
        new_form_turn(
            new.tracer_provider,
            new.logger_provider,
            agent=AGENT,
            conversation_id=CONVERSATION,
            question=Q4,
            answer=A4,
            history=[("user", Q1), ("assistant", A1), ("user", Q2), ("assistant", A2), ("user", Q3), ("assistant", A3)],
        )
        [first] = wait_runs(daemon, old, 1)
        second, third, fourth = wait_runs(daemon, new, 3)
    finally:
        old.shutdown()
        new.shutdown()

    turns = [
        (first, Q1, A1, []),
        (second, Q2, A2, [Q1, A1]),
        (third, Q3, A3, [Q1, A1, Q2, A2]),
        (fourth, Q4, A4, [Q1, A1, Q2, A2, Q3, A3]),
    ]
    for run, question, answer, history in turns:
        assert (run["agent_name"], run["conversation_id"], run["convention"], run["model"]) == (
            AGENT,
            CONVERSATION,
            "genai",
            MODEL,
        )
        assert texts(run["input_messages"]) == [("user", question)]
        assert texts(run["system_messages"]) == [("system", SYSTEM)]
        assert [content for _, content in texts(run["remembered_messages"])] == history
        assert final_text(run) == answer
        assert [(t["name"], t["arguments"], t["result"]) for t in run["tool_calls"]] == [(TOOL, ARGS, RESULT)]
        assert run["attributes"]["tracescorer.llm_calls"] == 2
    # the old form's CLIENT agent names its id; the new form's in-process agent has none
    assert [r["agent_id"] for r in (first, second, third, fourth)] == ["asst_weather", None, None, None]
    assert [r["service_name"] for r in (first, second, third, fourth)] == ["weather-v1"] + ["weather-v2"] * 3
    assert second["attributes"]["gen_ai.workflow.name"] == "trip_planner"
    assert "gen_ai.workflow.name" not in first["attributes"] | third["attributes"] | fourth["attributes"]
    # one conversation, whichever form each turn came in (the real CLI)
    listed = daemon_runs(daemon, "--conversation", CONVERSATION)
    assert sorted(r["run_id"] for r in listed) == sorted(r["run_id"] for r in (first, second, third, fourth))
