"""The GenAI conventions since they moved to their own repository, and the old form beside them:
spans emitted with the OTel SDK and opentelemetry-util-genai (support/genai_forms.py), through
the real OTLP encoding and decoding, then extraction."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from opentelemetry.util.genai.handler import TelemetryHandler
from opentelemetry.util.genai.types import InputMessage, OutputMessage, Text
from support.genai_forms import ARGS, MODEL, RESULT, SYSTEM, TOOL, new_form_turn, old_form_turn, workflow

from tracescorer.conventions import extract_runs
from tracescorer.conventions.genai import WORKFLOW_NAME, WORKFLOW_SPAN
from tracescorer.model import AgentRun
from tracescorer.receiver.decode import decode_logs_protobuf, decode_traces_protobuf

Emit = Callable[[TracerProvider, LoggerProvider], None]


def runs_of(emit: Emit) -> list[AgentRun]:
    """What ``emit`` sends, encoded as OTLP protobuf, decoded by the receiver, extracted."""
    resource = Resource.create({"service.name": "weather-svc"})
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider, logger_provider = TracerProvider(resource=resource), LoggerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    emit(tracer_provider, logger_provider)
    decoded = decode_traces_protobuf(encode_spans(spans.get_finished_spans()).SerializeToString()).spans
    finished = list(logs.get_finished_logs())
    records = decode_logs_protobuf(encode_logs(finished).SerializeToString()).records if finished else []
    extraction = extract_runs(decoded, records)
    assert extraction.unmatched_reason is None
    return extraction.runs


@pytest.fixture(autouse=True)
def content_on_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")


def texts(messages: Any) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages if m.content]


def check_turn(run: AgentRun, *, question: str, answer: str, history: list[tuple[str, str]], conversation: str) -> None:
    assert (run.agent_name, run.conversation_id, run.convention, run.model) == ("weather", conversation, "genai", MODEL)
    assert texts(run.input_messages) == [("user", question)]
    assert texts(run.system_messages) == [("system", SYSTEM)]
    assert texts(run.remembered_messages) == history
    assert texts(run.output)[-1] == ("assistant", answer)
    assert [(t.name, t.arguments, t.result) for t in run.tool_calls] == [(TOOL, ARGS, RESULT)]
    assert run.attributes["tracescorer.llm_calls"] == 2


def test_an_internal_agent_without_id_or_provider_is_a_run_and_its_plan_span_a_step() -> None:
    [run] = runs_of(
        lambda tp, lp: new_form_turn(tp, lp, agent="weather", conversation_id="c1", question="Q", answer="A")
    )
    check_turn(run, question="Q", answer="A", history=[], conversation="c1")
    assert run.agent_id is None
    assert WORKFLOW_NAME not in run.attributes
    # The renamed usage attribute (cache_write) is read as the old one was, per model call.
    assert run.usage == {"input_tokens": 40, "output_tokens": 10, "cache_creation_input_tokens": 14}


def test_the_old_form_a_client_agent_with_per_message_events() -> None:
    history = [("user", "Hi"), ("assistant", "Hello!")]
    [run] = runs_of(
        lambda tp, lp: old_form_turn(
            tp, lp, agent="weather", conversation_id="c1", question="Q", answer="A", history=history
        )
    )
    check_turn(run, question="Q", answer="A", history=history, conversation="c1")
    assert run.agent_id == "asst_weather"


def test_old_and_new_forms_in_one_trace() -> None:
    """The framework emits the new form, the OpenAI instrumentation below it still the old one."""
    [run] = runs_of(
        lambda tp, lp: new_form_turn(
            tp, lp, agent="weather", conversation_id="c1", question="Q", answer="A", old_chats=True
        )
    )
    check_turn(run, question="Q", answer="A", history=[], conversation="c1")


def test_runs_under_one_workflow_keep_their_identity_and_record_the_workflow() -> None:
    def emit(tp: TracerProvider, lp: LoggerProvider) -> None:
        with workflow(tp, lp, "trip_planner"):
            new_form_turn(tp, lp, agent="weather", conversation_id="c1", question="Q1", answer="A1")
            old_form_turn(tp, lp, agent="weather", conversation_id="c1", question="Q2", answer="A2")

    first, second = runs_of(emit)
    check_turn(first, question="Q1", answer="A1", history=[], conversation="c1")
    check_turn(second, question="Q2", answer="A2", history=[], conversation="c1")
    assert (first.agent_id, second.agent_id) == (None, "asst_weather")
    assert first.attributes[WORKFLOW_NAME] == second.attributes[WORKFLOW_NAME] == "trip_planner"
    assert first.attributes[WORKFLOW_SPAN] == second.attributes[WORKFLOW_SPAN] == first.parent_span_id
    assert first.run_id != second.run_id


def test_a_workflow_with_model_calls_and_no_agent_span_is_the_run() -> None:
    def emit(tp: TracerProvider, lp: LoggerProvider) -> None:
        handler = TelemetryHandler(tracer_provider=tp, logger_provider=lp)
        with handler.workflow("summarise") as flow:
            flow.input_messages = [InputMessage(role="user", parts=[Text(content="Sum it up")])]
            with handler.inference("openai", request_model=MODEL) as call:
                call.input_messages = [InputMessage(role="user", parts=[Text(content="Sum it up")])]
                call.output_messages = [
                    OutputMessage(role="assistant", parts=[Text(content="Done")], finish_reason="stop")
                ]

    [run] = runs_of(emit)
    assert (run.agent_name, run.attributes[WORKFLOW_NAME]) == ("summarise", "summarise")
    assert texts(run.input_messages) == [("user", "Sum it up")]
    assert texts(run.output) == [("assistant", "Done")]


def test_a_remote_agent_client_span_alone_is_a_run_of_its_own_messages() -> None:
    def emit(tp: TracerProvider, lp: LoggerProvider) -> None:
        handler = TelemetryHandler(tracer_provider=tp, logger_provider=lp)
        with handler.invoke_remote_agent("aws.bedrock", agent_name="booking") as run:
            run.agent_id = "AGENT42"
            run.conversation_id = "sess-9"
            run.input_messages = [InputMessage(role="user", parts=[Text(content="Book a table")])]
            run.output_messages = [
                OutputMessage(role="assistant", parts=[Text(content="Booked")], finish_reason="stop")
            ]

    [run] = runs_of(emit)
    assert (run.agent_name, run.agent_id, run.conversation_id) == ("booking", "AGENT42", "sess-9")
    assert texts(run.input_messages) == [("user", "Book a table")]
    assert texts(run.output) == [("assistant", "Booked")]


def test_message_content_structured_on_the_inference_event(monkeypatch: pytest.MonkeyPatch) -> None:
    """EVENT_ONLY: no content on spans, the messages structured (not JSON text) on the
    ``gen_ai.client.inference.operation.details`` log record."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "EVENT_ONLY")
    [run] = runs_of(
        lambda tp, lp: new_form_turn(tp, lp, agent="weather", conversation_id="c1", question="Q", answer="A")
    )
    check_turn(run, question="Q", answer="A", history=[], conversation="c1")


def _agent_span(tp: TracerProvider, attributes: dict[str, Any]) -> None:
    tracer = tp.get_tracer("app")
    with tracer.start_as_current_span("invoke_agent weather", kind=SpanKind.INTERNAL, attributes=attributes):
        pass


def test_text_only_system_instructions_and_output_without_finish_reason() -> None:
    """``gen_ai.system_instructions`` holds text parts only (several: one system message);
    ``finish_reason`` on output messages is deprecated: an output without it is read the same."""
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "weather",
        "gen_ai.system_instructions": json.dumps(
            [{"type": "text", "content": "You are a weather assistant."}, {"type": "text", "content": "Be brief."}]
        ),
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Q"}]}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "A"}]}]),
    }
    [run] = runs_of(lambda tp, lp: _agent_span(tp, attributes))
    [system] = run.system_messages
    assert [p.content for p in system.parts] == ["You are a weather assistant.", "Be brief."]
    assert texts(run.input_messages) == [("user", "Q")]
    assert texts(run.output) == [("assistant", "A")]


@pytest.mark.parametrize("key", ["gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_write.input_tokens"])
def test_both_cache_write_usage_names(key: str) -> None:
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather", key: 12}
    [run] = runs_of(lambda tp, lp: _agent_span(tp, attributes))
    assert run.usage == {"cache_creation_input_tokens": 12}


def test_a_plan_span_is_a_step_never_a_model_call() -> None:
    """A plan span holds the planning phase (its model call below it, and the tool calls it
    decided); one that records the plan itself is still no model call of the run."""

    def emit(tp: TracerProvider, lp: LoggerProvider) -> None:
        tracer = tp.get_tracer("app")
        plan = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "1. look up 2. answer"}]}])
        agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather"}
        with tracer.start_as_current_span("invoke_agent weather", attributes=agent):
            step = {"gen_ai.operation.name": "plan", "gen_ai.agent.name": "weather", "gen_ai.output.messages": plan}
            with tracer.start_as_current_span("plan weather", attributes=step):
                pass
            new_form_turn(tp, lp, agent="helper", conversation_id="c1", question="Q", answer="A")

    outer, inner = runs_of(emit)
    assert (outer.agent_name, outer.attributes["tracescorer.llm_calls"], outer.output) == ("weather", 0, ())
    assert (inner.agent_name, inner.parent_span_id, inner.attributes["tracescorer.llm_calls"]) == (
        "helper",
        outer.span_id,
        2,
    )


@pytest.mark.parametrize(
    ("span_name", "attributes"),
    [
        ("invoke_workflow trip_planner", {"gen_ai.workflow.name": "trip_planner"}),
        ("invoke_workflow trip_planner", {"gen_ai.agent.name": "trip_planner"}),  # semantic-conventions-genai 0.1
        ("invoke_workflow trip_planner", {}),
    ],
)
def test_the_workflow_name_in_each_form(span_name: str, attributes: dict[str, Any]) -> None:
    def emit(tp: TracerProvider, lp: LoggerProvider) -> None:
        flow = {"gen_ai.operation.name": "invoke_workflow", **attributes}
        with tp.get_tracer("app").start_as_current_span(span_name, attributes=flow):
            new_form_turn(tp, lp, agent="weather", conversation_id="c1", question="Q", answer="A")

    [run] = runs_of(emit)
    assert (run.agent_name, run.attributes[WORKFLOW_NAME]) == ("weather", "trip_planner")
