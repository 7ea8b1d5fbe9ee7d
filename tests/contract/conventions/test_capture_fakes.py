"""The doubles captures are recorded with: the auto agent model (tool calls, answers, streaming)
and the OTLP capture server's raw trace and log bodies, driven by the real clients."""

from __future__ import annotations

import json

import openai
from fakes.agent_openai import AutoAgentOpenAI
from fakes.otlp_capture import OtlpCapture
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
EXPERT = {
    "type": "function",
    "function": {
        "name": "local_expert",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}


CODE_PROMPT = """You are an expert assistant who can solve any task using code blobs.
Write code between '<code>' and '</code>'; call final_answer to end.
def get_weather(city: string) -> string:
    \"\"\"Get the weather.\"\"\"
def local_expert(task: str, additional_args: dict[str, Any]) -> str:
    \"\"\"A team member.\"\"\"
def final_answer(answer: any) -> any:
    \"\"\"Ends the task.\"\"\"
"""


def test_auto_agent_writes_code_for_a_code_agent() -> None:
    """smolagents' CodeAgent offers no tools: the prompt lists them as stubs; the model writes
    `result = <tool>(...)`, then `final_answer(...)` once that code ran (over real HTTP)."""
    with AutoAgentOpenAI() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        system = {"role": "system", "content": [{"type": "text", "text": CODE_PROMPT}]}
        task = [system, {"role": "user", "content": "New task:\nWhat is the weather in Paris?"}]
        first = client.chat.completions.create(model="m", messages=task).choices[0].message.content
        assert first is not None and "<code>\nresult = get_weather(city='Paris')" in first
        ran = [*task, {"role": "assistant", "content": first}, {"role": "user", "content": "Observation: Sunny"}]
        second = client.chat.completions.create(model="m", messages=ran).choices[0].message.content
        assert second is not None and 'final_answer(f"Result from get_weather: {result}")' in second
        # a new task merged into the last observation, a team member named in it
        follow = [*ran, {"role": "assistant", "content": second}]
        follow.append({"role": "user", "content": "Observation: done\nNew task:\nAsk the local_expert about Rome."})
        third = client.chat.completions.create(model="m", messages=follow).choices[0].message.content
        assert third is not None and "result = local_expert(task='Ask the local_expert about Rome.')" in third


def test_auto_agent_calls_tools_answers_results_and_streams() -> None:
    with AutoAgentOpenAI() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        ask = [{"role": "user", "content": "Is it raining in Berlin or Paris?"}]
        msg = client.chat.completions.create(model="m", messages=ask, tools=[WEATHER, EXPERT]).choices[0].message
        (call,) = msg.tool_calls or []
        # The first tool whose arguments the turn supplies; the first city named in the turn.
        assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
            "call_get_weather_1",
            "get_weather",
            {"city": "Berlin"},
        )
        named = (
            client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "Ask the local_expert about Oslo."}],
                tools=[WEATHER, EXPERT],
            )
            .choices[0]
            .message
        )
        assert named.tool_calls and named.tool_calls[0].function.name == "local_expert"
        after = [
            *ask,
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "Cloudy"},
        ]
        chunks = list(
            client.chat.completions.create(
                model="m", messages=after, tools=[WEATHER], stream=True, stream_options={"include_usage": True}
            )
        )
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
            "Result from get_weather: Cloudy"
        )
        assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
        streamed = list(client.chat.completions.create(model="m", messages=ask, tools=[WEATHER], stream=True))
        calls = [tc for c in streamed if c.choices for tc in c.choices[0].delta.tool_calls or ()]
        assert [(tc.id, tc.function.name) for tc in calls] == [("call_get_weather_3", "get_weather")]
        plain = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Thanks!"}])
        assert plain.choices[0].message.content == "You said: Thanks!"


def test_auto_agent_answers_a_tool_result_through_an_offered_final_answer_tool() -> None:
    """An agent that answers through its ``final_answer`` tool (BeeAI's RequirementAgent) gets the
    answer as that call's argument, not as text."""
    final = {
        "type": "function",
        "function": {
            "name": "final_answer",
            "parameters": {"type": "object", "properties": {"response": {"type": "string"}}, "required": ["response"]},
        },
    }
    with AutoAgentOpenAI() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
        after = [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "Snow"},
        ]
        msg = client.chat.completions.create(model="m", messages=after, tools=[WEATHER, final]).choices[0].message
        (answer,) = msg.tool_calls or []
        assert (msg.content, answer.function.name, json.loads(answer.function.arguments)) == (
            None,
            "final_answer",
            {"response": "Result from get_weather: Snow"},
        )


def test_capture_server_keeps_trace_and_log_bodies_over_both_transports() -> None:
    with OtlpCapture() as capture:
        tp = TracerProvider()
        tp.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=capture.http_endpoint)))
        with tp.get_tracer("t").start_as_current_span("s"):
            pass
        tp.shutdown()
        for exporter in (
            HttpLogExporter(endpoint=capture.http_base_url + "/v1/logs"),
            GrpcLogExporter(endpoint=capture.grpc_endpoint, insecure=True),
        ):
            lp = LoggerProvider()
            lp.add_log_record_processor(SimpleLogRecordProcessor(exporter))
            lp.get_logger("l").emit(body="hello", attributes={"event.name": "gen_ai.user.message"})
            lp.shutdown()
        capture.wait_for_exports(3)
        (export,) = capture.trace_exports
        assert ExportTraceServiceRequest.FromString(export.raw).resource_spans[0].scope_spans[0].spans[0].name == "s"
        logs = capture.log_exports
        assert [e.transport for e in logs] == ["http", "grpc"]
        record = logs[0].request.resource_logs[0].scope_logs[0].log_records[0]
        assert record.body.string_value == "hello"
