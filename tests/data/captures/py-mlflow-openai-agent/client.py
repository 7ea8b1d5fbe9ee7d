# venv: mlflow
"""MLflow tracing exported over OTLP (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT + protocol http/protobuf:
MLflow's own OtelSpanProcessor, no tracking server), mlflow.openai.autolog() for the OpenAI
client, and the agent and its tools written with @mlflow.trace as an MLflow user would.
With CAPTURE_MLFLOW_SEMCONV=1, MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true (MLflow translates its
spans to GenAI semantic-convention attributes before export) and OTLP/gRPC.

@mlflow.trace(span_type=AGENT, name="support_agent") support_agent(history, question), its
session and user set with mlflow.update_current_trace(metadata={"mlflow.trace.session":
"sess-mlflow-1", "mlflow.trace.user": "user-mlflow"}); tools @mlflow.trace(span_type=TOOL):
get_weather(city) and local_expert(question), which runs a second agent, @mlflow.trace(span_type=
AGENT, name="weather_expert") weather_expert(question) with its own get_weather call.
 run 1: [system, user "What is the weather in Paris?"] -> get_weather({"city": "Paris"})
        -> "Sunny, 22C" -> "Result from get_weather: Sunny, 22C"
 run 2: history [user run 1, assistant run 1] + user "Ask the local_expert about Berlin."
        -> local_expert({"question": "Ask the local_expert about Berlin."})
        nested run weather_expert: [system, user "Ask the local_expert about Berlin."]
          -> get_weather({"city": "Berlin"}) -> "Cloudy, 15C" -> "Result from get_weather: Cloudy, 15C"
        -> "Result from local_expert: Result from get_weather: Cloudy, 15C"
"""
import json
import os

semconv = os.environ.get("CAPTURE_MLFLOW_SEMCONV") == "1"
if semconv:
    os.environ["MLFLOW_ENABLE_OTEL_GENAI_SEMCONV"] = "true"
    os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = os.environ["OTLP_GRPC_ENDPOINT"]
    os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "grpc"
else:
    os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = os.environ["OTLP_HTTP_ENDPOINT"] + "/v1/traces"
    os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
os.environ["OTEL_SERVICE_NAME"] = os.environ["CAPTURE_CASE"]

import mlflow  # noqa: E402
from mlflow.entities import SpanType  # noqa: E402
from openai import OpenAI  # noqa: E402

mlflow.openai.autolog()
client = OpenAI()
WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}


def schema(name: str, param: str, doc: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": doc, "parameters": {
        "type": "object", "properties": {param: {"type": "string"}}, "required": [param]}}}


@mlflow.trace(span_type=SpanType.TOOL)
def get_weather(city: str) -> str:
    return WEATHER.get(city, "Unknown")


def run_loop(system: str, history: list, question: str, tools: dict, schemas: list) -> str:
    messages = [{"role": "system", "content": system}, *history, {"role": "user", "content": question}]
    while True:
        m = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=schemas).choices[0].message
        if not m.tool_calls:
            return m.content
        messages.append({"role": "assistant", "content": m.content,
                         "tool_calls": [tc.model_dump() for tc in m.tool_calls]})
        for tc in m.tool_calls:
            result = tools[tc.function.name](**json.loads(tc.function.arguments))
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": result})


@mlflow.trace(span_type=SpanType.AGENT, name="weather_expert")
def weather_expert(question: str) -> str:
    return run_loop("You are a local expert who knows the weather everywhere.", [], question,
                    {"get_weather": get_weather}, [schema("get_weather", "city", "Get the weather for a city")])


@mlflow.trace(span_type=SpanType.TOOL)
def local_expert(question: str) -> str:
    return weather_expert(question)


@mlflow.trace(span_type=SpanType.AGENT, name="support_agent")
def support_agent(history: list, question: str) -> str:
    mlflow.update_current_trace(metadata={"mlflow.trace.session": "sess-mlflow-1", "mlflow.trace.user": "user-mlflow"})
    return run_loop("You are a concise travel assistant.", history, question,
                    {"get_weather": get_weather, "local_expert": local_expert},
                    [schema("get_weather", "city", "Get the weather for a city"),
                     schema("local_expert", "question", "Ask the local expert")])


q1 = "What is the weather in Paris?"
a1 = support_agent([], q1)
print("run1:", a1)
a2 = support_agent([{"role": "user", "content": q1}, {"role": "assistant", "content": a1}],
                   "Ask the local_expert about Berlin.")
print("run2:", a2)
mlflow.flush_trace_async_logging() if hasattr(mlflow, "flush_trace_async_logging") else None
from opentelemetry import trace  # noqa: E402

from mlflow.tracing.provider import provider  # noqa: E402

tp = provider.get() if hasattr(provider, "get") else None
for p in (tp, trace.get_tracer_provider()):
    if p is not None and hasattr(p, "shutdown"):
        p.shutdown()
