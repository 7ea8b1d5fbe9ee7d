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
