"""Live: real instrumentation libraries drive a local fake OpenAI server and export to the daemon.

Each scenario is a two-turn conversation with one agent ("What is the weather in Paris?" -> tool
call ``get_weather({"city": "Paris"})`` -> answer; then "Do I need an umbrella?" with the first turn
as history), instrumented by

- opentelemetry-instrumentation-openai-v2 (``chat`` spans; content on the span, as a
  ``gen_ai.client.inference.operation.details`` OTLP log record, or both) under the app's own GenAI
  ``invoke_agent`` / ``execute_tool`` spans;
- openinference-instrumentation-openai (``LLM`` spans) under OpenInference ``AGENT`` / ``TOOL``
  spans from an ``OITracer``, inside ``using_session``;
- pydantic-ai's built-in instrumentation (``InstrumentationSettings(tracer_provider=...)``; data
  format default and 6), alone and with openai-v2 instrumenting its OpenAI calls underneath;

and with content capture off (openai-v2 ``NO_CONTENT``, OpenInference ``hide_inputs/hide_outputs``,
pydantic-ai ``include_content=False``). Spans and log records go over OTLP (gRPC or HTTP) with the
SDK's own exporters to a real ``tracescorer serve``; assertions read ``tracescorer runs --format jsonl``.

Every test owns its TracerProvider / LoggerProvider (never the global ones) and uninstruments on
the way out, so the libraries' patches of the ``openai`` module do not leak between tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fakes.agent_openai import AgentOpenAI, Reply, last_tool, last_user, tool_call
from support.daemon import DaemonProcess, config_dict
from support.live import (
    Telemetry,
    daemon_runs,
    final_text,
    import_openai_v2_instrumentor,
    output_tool_call_parts,
    texts,
    wait_runs,
)

MODEL = "gpt-4o-mini"
SYSTEM = "You are a weather assistant."
Q1, A1 = "What is the weather in Paris?", "It is sunny and 22C in Paris."
Q2, A2 = "Do I need an umbrella?", "No, you will not need an umbrella."
ARGS = {"city": "Paris"}
TOOL_RESULT = "sunny, 22C"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather of a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def get_weather(city: str) -> str:
    """Current weather of a city."""
    assert city == "Paris"
    return TOOL_RESULT


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    tmp = tmp_path_factory.mktemp("live")
    proc = DaemonProcess(tmp, config_dict(tmp, assembly={"idle_s": 0.3})).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def llm() -> Iterator[AgentOpenAI]:
    with AgentOpenAI(model=MODEL) as server:
        server.script(last_user(Q1), tool_call("get_weather", ARGS, "call_1"))
        server.script(last_tool("call_1"), Reply.text(A1))
        server.script(last_user(Q2), Reply.text(A2))
        yield server


@contextmanager
def telemetry_for(daemon: DaemonProcess, service: str, transport: str) -> Iterator[Telemetry]:
    telemetry = Telemetry(daemon, service, transport)
    try:
        yield telemetry
    finally:
        telemetry.shutdown()


# -- the app's agent loop (for the instrumentors of the bare OpenAI client) --------------------

AgentSpan = Callable[[str], Any]  # question -> context manager yielding finish(answer)
ToolSpan = Callable[[Any, str], None]  # (tool call, result) -> records the tool span


def agent_loop(base_url: str, agent_span: AgentSpan, tool_span: ToolSpan) -> None:
    """Two turns of a hand-written tool-calling agent over the real ``openai`` client."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for question in (Q1, Q2):
        with agent_span(question) as finish:
            history.append({"role": "user", "content": question})
            while True:
                msg = client.chat.completions.create(model=MODEL, messages=history, tools=TOOLS).choices[0].message
                history.append(msg.model_dump(exclude_none=True))
                if not msg.tool_calls:
                    break
                for call in msg.tool_calls:
                    result = get_weather(**json.loads(call.function.arguments))
                    tool_span(call, result)
                    history.append({"role": "tool", "tool_call_id": call.id, "content": result})
            finish(msg.content)
    client.close()


# -- checks ------------------------------------------------------------------------------------


def roots(telemetry: Telemetry) -> dict[str, str]:
    """trace id -> span id of its root span."""
    return {
        format(s.context.trace_id, "032x"): format(s.context.span_id, "016x")
        for s in telemetry.finished()
        if s.parent is None
    }


def emitted_usage(telemetry: Telemetry, trace_id: str, in_key: str, out_key: str) -> tuple[int, int]:
    """Token counts the library put on the model-call spans of one trace, summed."""
    spans = [s for s in telemetry.finished() if format(s.context.trace_id, "032x") == trace_id]
    return (
        sum(int((s.attributes or {}).get(in_key, 0)) for s in spans),
        sum(int((s.attributes or {}).get(out_key, 0)) for s in spans),
    )


@contextmanager
def showing(telemetry: Telemetry, runs: list[dict[str, Any]]) -> Iterator[None]:
    """On a failed assertion, add the runs and everything the library emitted to the message."""
    try:
        yield
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}\n--- runs:\n{json.dumps(runs, indent=1)}\n--- emitted:\n{telemetry.describe()}"
        ) from None


def check_run_identity(
    runs: list[dict[str, Any]],
    telemetry: Telemetry,
    *,
    service: str,
    convention: str,
    agent_name: str | None,
    conversation_id: str | None,
) -> None:
    assert len(runs) == 2, f"expected one run per turn, got {len(runs)}"
    traces = telemetry.trace_ids()
    root_of = roots(telemetry)
    for run, trace in zip(runs, traces, strict=False):
        assert run["trace_id"] == trace
        assert run["span_id"] == root_of[trace]  # the agent span
        assert run["parent_span_id"] is None
        assert run["service_name"] == service
        assert run["convention"] == convention
        assert run["agent_name"] == agent_name
        assert run["conversation_id"] == conversation_id
        assert run["model"] == MODEL
        assert run["status"] == "ok" and run["error"] is None
        assert run["started_at"] <= run["ended_at"]


def check_weather_conversation(runs: list[dict[str, Any]]) -> None:
    """Messages, output and tool calls of the two turns, as the contract describes them."""
    first, second = runs
    for run in runs:
        assert texts(run["system_messages"]) == [("system", SYSTEM)]
        assert all(m["role"] != "system" for m in run["remembered_messages"] + run["input_messages"])

    # turn 1: the question is the new input; the tool round-trip is neither input nor history
    assert texts(first["input_messages"]) == [("user", Q1)]
    assert [m["role"] for m in first["input_messages"]] == ["user"]
    assert first["remembered_messages"] == []
    assert final_text(first) == A1
    assert [(m["role"], m["content"]) for m in first["output"]] == [("assistant", ""), ("assistant", A1)]
    calls = output_tool_call_parts(first)
    assert [(p["id"], p["name"], p["arguments"]) for p in calls] == [("call_1", "get_weather", ARGS)]
    assert first["tool_calls"] == [
        {"id": "call_1", "name": "get_weather", "arguments": ARGS, "result": TOOL_RESULT, "error": None}
    ]

    # turn 2: only the new question is input; turn 1 is remembered, not input again
    assert texts(second["input_messages"]) == [("user", Q2)]
    assert texts(second["remembered_messages"]) == [("user", Q1), ("assistant", A1)]
    remembered_calls = [p for m in second["remembered_messages"] for p in m["parts"] if p["type"] == "tool_call"]
    assert [(p["id"], p["name"]) for p in remembered_calls] == [("call_1", "get_weather")]
    assert texts(second["output"]) == [("assistant", A2)]
    assert final_text(second) == A2
    assert second["tool_calls"] == []


def check_usage(runs: list[dict[str, Any]], telemetry: Telemetry, in_key: str, out_key: str) -> None:
    for run in runs:
        want = emitted_usage(telemetry, run["trace_id"], in_key, out_key)
        assert want[0] > 0 and want[1] > 0
        assert (run["usage"]["input_tokens"], run["usage"]["output_tokens"]) == want


def check_no_content(run: dict[str, Any]) -> None:
    assert run["attributes"].get("tracescorer.content_captured") is False
    for key in ("input_messages", "remembered_messages", "system_messages", "output"):
        assert run[key] == [], key
    assert run["tagged_system_messages"] == {}


# -- opentelemetry-instrumentation-openai-v2 ---------------------------------------------------


def genai_app_spans(
    telemetry: Telemetry, conversation_id: str, *, record_tool_content: bool
) -> tuple[AgentSpan, ToolSpan]:
    """The app's own GenAI agent and tool spans around the instrumented ``chat`` calls."""
    tracer = telemetry.tracer_provider.get_tracer("weather-app", "1.0")

    @contextmanager
    def agent_span(question: str) -> Iterator[Callable[[str | None], None]]:
        with tracer.start_as_current_span(
            "invoke_agent weather-agent",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "weather-agent",
                "gen_ai.agent.id": "agent-7",
                "gen_ai.conversation.id": conversation_id,
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": MODEL,
            },
        ):
            yield lambda answer: None

    def tool_span(call: Any, result: str) -> None:
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.function.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        if record_tool_content:
            attrs |= {"gen_ai.tool.call.arguments": call.function.arguments, "gen_ai.tool.call.result": result}
        with tracer.start_as_current_span(f"execute_tool {call.function.name}", attributes=attrs):
            pass

    return agent_span, tool_span


@contextmanager
def openai_v2(monkeypatch: pytest.MonkeyPatch, telemetry: Telemetry, capture: str) -> Iterator[None]:
    """openai-v2 instrumenting the ``openai`` module into this test's providers only."""
    instrumentor_cls = import_openai_v2_instrumentor()
    # read when instrument() builds its TelemetryHandler
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", capture)
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT", raising=False)
    instrumentor = instrumentor_cls()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider, logger_provider=telemetry.logger_provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()


@pytest.mark.parametrize(
    ("capture", "transport"),
    [
        ("span_only", "grpc"),  # gen_ai.input/output.messages + system instructions on the chat span
        ("event_only", "http"),  # the same as a gen_ai.client.inference.operation.details log record
        ("span_and_event", "grpc"),  # both: must not double the messages
    ],
)
def test_openai_v2_multi_turn_with_tool(
    daemon: DaemonProcess, llm: AgentOpenAI, monkeypatch: pytest.MonkeyPatch, capture: str, transport: str
) -> None:
    service, conversation = f"v2-{capture}", f"conv-v2-{capture}"
    with telemetry_for(daemon, service, transport) as telemetry, openai_v2(monkeypatch, telemetry, capture):
        agent_loop(llm.base_url, *genai_app_spans(telemetry, conversation, record_tool_content=True))
        runs = wait_runs(daemon, telemetry, 2)
        chat_spans = [s for s in telemetry.finished() if s.name == f"chat {MODEL}"]
        logs = telemetry.logs.get_finished_logs()
        with showing(telemetry, runs):
            assert len(chat_spans) == 3  # the library really instrumented every call
            has_span_content = any("gen_ai.input.messages" in (s.attributes or {}) for s in chat_spans)
            assert has_span_content == (capture != "event_only")
            assert len(logs) == (0 if capture == "span_only" else 3)
            check_run_identity(
                runs,
                telemetry,
                service=service,
                convention="genai",
                agent_name="weather-agent",
                conversation_id=conversation,
            )
            assert all(r["agent_id"] == "agent-7" for r in runs)
            check_weather_conversation(runs)
            check_usage(runs, telemetry, "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")
            assert [r["attributes"].get("tracescorer.llm_calls") for r in runs] == [2, 1]
            assert all(r["attributes"].get("tracescorer.content_captured", True) is True for r in runs)
            # the daemon's filters find the same runs
            assert [r["run_id"] for r in daemon_runs(daemon, "--conversation", conversation)] == [
                r["run_id"] for r in runs
            ]
            assert daemon_runs(daemon, "--trace", runs[1]["trace_id"]) == [runs[1]]


def test_openai_v2_content_capture_off(
    daemon: DaemonProcess, llm: AgentOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, conversation = "v2-no-content", "conv-v2-no-content"
    with telemetry_for(daemon, service, "grpc") as telemetry, openai_v2(monkeypatch, telemetry, "no_content"):
        agent_loop(llm.base_url, *genai_app_spans(telemetry, conversation, record_tool_content=False))
        runs = wait_runs(daemon, telemetry, 2)
        with showing(telemetry, runs):
            assert not any(
                k.startswith(("gen_ai.input", "gen_ai.output"))
                for s in telemetry.finished()
                for k in (s.attributes or {})
            )
            assert telemetry.logs.get_finished_logs() == ()
            check_run_identity(
                runs,
                telemetry,
                service=service,
                convention="genai",
                agent_name="weather-agent",
                conversation_id=conversation,
            )
            for run in runs:
                check_no_content(run)
            check_usage(runs, telemetry, "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")
            # the tool execution is still known, by id and name
            assert [(c["id"], c["name"]) for c in runs[0]["tool_calls"]] == [("call_1", "get_weather")]
            assert runs[1]["tool_calls"] == []


# -- openinference-instrumentation-openai ------------------------------------------------------


@contextmanager
def openinference(telemetry: Telemetry, session: str, **config: bool) -> Iterator[tuple[AgentSpan, ToolSpan]]:
    """openinference-instrumentation-openai into this test's provider, plus the app's AGENT / TOOL
    spans from an ``OITracer``, all inside ``using_session(session)``."""
    from openinference.instrumentation import OITracer, TraceConfig, using_session
    from openinference.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider, config=TraceConfig(**config))
    tracer = OITracer(telemetry.tracer_provider.get_tracer("weather-app", "1.0"), config=TraceConfig(**config))

    @contextmanager
    def agent_span(question: str) -> Iterator[Callable[[str | None], None]]:
        with tracer.start_as_current_span("weather-agent", openinference_span_kind="agent") as span:
            span.set_input(question)
            yield span.set_output

    def tool_span(call: Any, result: str) -> None:
        with tracer.start_as_current_span(call.function.name, openinference_span_kind="tool") as span:
            span.set_tool(
                name=call.function.name,
                description=TOOLS[0]["function"]["description"],
                parameters=TOOLS[0]["function"]["parameters"],
            )
            span.set_input(json.loads(call.function.arguments))
            span.set_output(result)

    try:
        with using_session(session):
            yield agent_span, tool_span
    finally:
        instrumentor.uninstrument()


def test_openinference_multi_turn_with_tool(daemon: DaemonProcess, llm: AgentOpenAI) -> None:
    service, session = "openinference", "conv-openinference"
    with telemetry_for(daemon, service, "http") as telemetry:
        with openinference(telemetry, session) as (agent_span, tool_span):
            agent_loop(llm.base_url, agent_span, tool_span)
        runs = wait_runs(daemon, telemetry, 2)
        with showing(telemetry, runs):
            llm_spans = [
                s for s in telemetry.finished() if (s.attributes or {}).get("openinference.span.kind") == "LLM"
            ]
            assert len(llm_spans) == 3
            check_run_identity(
                runs,
                telemetry,
                service=service,
                convention="openinference",
                agent_name="weather-agent",
                conversation_id=session,
            )
            check_weather_conversation(runs)
            check_usage(runs, telemetry, "llm.token_count.prompt", "llm.token_count.completion")
            assert [r["attributes"].get("tracescorer.llm_calls") for r in runs] == [2, 1]


def test_openinference_content_hidden(daemon: DaemonProcess, llm: AgentOpenAI) -> None:
    """OpenInference's own way to turn content off: TraceConfig(hide_inputs, hide_outputs)."""
    service, session = "openinference-hidden", "conv-openinference-hidden"
    with telemetry_for(daemon, service, "grpc") as telemetry:
        with openinference(telemetry, session, hide_inputs=True, hide_outputs=True) as (agent_span, tool_span):
            agent_loop(llm.base_url, agent_span, tool_span)
        runs = wait_runs(daemon, telemetry, 2)
        with showing(telemetry, runs):
            emitted = telemetry.describe()
            assert not any(text in emitted for text in (SYSTEM, Q1, A1, Q2, A2, TOOL_RESULT))
            assert '"input.value": "__REDACTED__"' in emitted  # openinference's REDACTED_VALUE
            check_run_identity(
                runs,
                telemetry,
                service=service,
                convention="openinference",
                agent_name="weather-agent",
                conversation_id=session,
            )
            check_usage(runs, telemetry, "llm.token_count.prompt", "llm.token_count.completion")
            assert [c["name"] for c in runs[0]["tool_calls"]] == ["get_weather"]
            # the redaction marker is content not captured: never text, never tool arguments
            assert not any("__REDACTED__" in json.dumps(r) for r in runs)
            assert runs[0]["tool_calls"][0]["arguments"] is None
            for run in runs:
                check_no_content(run)


# -- pydantic-ai -------------------------------------------------------------------------------


def pydantic_agent(base_url: str, telemetry: Telemetry, **settings: Any) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    instrumentation = InstrumentationSettings(tracer_provider=telemetry.tracer_provider, **settings)
    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=base_url, api_key="sk-test"))
    try:  # pydantic-ai 1.x
        agent = Agent(model, name="weather_agent", instructions=SYSTEM, instrument=instrumentation)
    except TypeError:  # 2.x: instrumentation is a capability
        from pydantic_ai.capabilities import Instrumentation

        agent = Agent(
            model, name="weather_agent", instructions=SYSTEM, capabilities=[Instrumentation(settings=instrumentation)]
        )
    agent.tool_plain(get_weather)
    return agent


def run_pydantic_conversation(agent: Any) -> str | None:
    """Two turns; returns the conversation id pydantic-ai gave the run (None before it had one)."""
    first = agent.run_sync(Q1)
    assert first.output == A1
    second = agent.run_sync(Q2, message_history=first.all_messages())
    assert second.output == A2
    return getattr(first, "conversation_id", None)


@pytest.mark.parametrize("version", [None, 6], ids=["default-format", "format-6"])
def test_pydantic_ai_multi_turn_with_tool(daemon: DaemonProcess, llm: AgentOpenAI, version: int | None) -> None:
    service = f"pydantic-ai-{version or 'default'}"
    with telemetry_for(daemon, service, "grpc") as telemetry:
        agent = pydantic_agent(llm.base_url, telemetry, **({"version": version} if version else {}))
        conversation = run_pydantic_conversation(agent)
        runs = wait_runs(daemon, telemetry, 2)
        with showing(telemetry, runs):
            check_run_identity(
                runs,
                telemetry,
                service=service,
                convention="pydantic_ai",
                agent_name="weather_agent",
                conversation_id=conversation,
            )
            check_weather_conversation(runs)
            check_usage(runs, telemetry, "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")
            assert [r["attributes"].get("tracescorer.llm_calls") for r in runs] == [2, 1]


def test_pydantic_ai_over_openai_v2(daemon: DaemonProcess, llm: AgentOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both at once (a common setup): pydantic-ai's agent/chat spans with openai-v2 chat spans below
    its chat spans. Same runs; nothing doubled."""
    service = "pydantic-ai-over-openai-v2"
    with telemetry_for(daemon, service, "http") as telemetry, openai_v2(monkeypatch, telemetry, "span_only"):
        agent = pydantic_agent(llm.base_url, telemetry)
        conversation = run_pydantic_conversation(agent)
        runs = wait_runs(daemon, telemetry, 2)
        with showing(telemetry, runs):
            chat_spans = [s for s in telemetry.finished() if s.name == f"chat {MODEL}"]
            assert len(chat_spans) == 6  # pydantic-ai's and openai-v2's, one inside the other
            check_run_identity(
                runs,
                telemetry,
                service=service,
                convention="pydantic_ai",
                agent_name="weather_agent",
                conversation_id=conversation,
            )
            check_weather_conversation(runs)
            # the agent span's aggregated usage: summing both kinds of chat span would double it
            check_usage(
                runs, telemetry, "gen_ai.aggregated_usage.input_tokens", "gen_ai.aggregated_usage.output_tokens"
            )
            assert [r["attributes"].get("tracescorer.llm_calls") for r in runs] == [2, 1]


def test_pydantic_ai_content_capture_off(daemon: DaemonProcess, llm: AgentOpenAI) -> None:
    service = "pydantic-ai-no-content"
    with telemetry_for(daemon, service, "grpc") as telemetry:
        agent = pydantic_agent(llm.base_url, telemetry, include_content=False)
        conversation = run_pydantic_conversation(agent)
        runs = wait_runs(daemon, telemetry, 2)
        with showing(telemetry, runs):
            emitted = telemetry.describe()
            # the messages' structure is still there, without any text
            assert "pydantic_ai.all_messages" in emitted
            assert not any(text in emitted for text in (SYSTEM, Q1, A1, Q2, A2, TOOL_RESULT, '"Paris"'))
            check_run_identity(
                runs,
                telemetry,
                service=service,
                convention="pydantic_ai",
                agent_name="weather_agent",
                conversation_id=conversation,
            )
            check_usage(runs, telemetry, "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")
            assert [(c["id"], c["name"]) for c in runs[0]["tool_calls"]] == [("call_1", "get_weather")]
            # the transcript still lists the messages' structure (parts without text, tool ids and
            # names): structure only is content not captured, and no tool round-trip is history
            assert runs[0]["tool_calls"][0]["arguments"] is None
            for run in runs:
                check_no_content(run)
