# venv: litellm
"""LiteLLM's own OpenTelemetry callback (litellm.callbacks = ["otel"]; OTEL_EXPORTER=otlp_http,
OTEL_ENDPOINT = the capture server), litellm.completion("openai/gpt-4o-mini") at the fake model,
an agent loop written by hand with one tool. No application span: every completion call is a
trace of its own (litellm_request > raw_gen_ai_request).

With CAPTURE_LITELLM_APP_SPAN=1 (../py-litellm-otel-app-span): each turn runs inside the
application's own span "support_agent" (an SDK TracerProvider set globally before LiteLLM starts,
so LiteLLM uses it): LiteLLM then writes its gen_ai.* attributes onto that span — every call of
the turn overwrites the previous one's keys — and records each call only as a raw_gen_ai_request
child span (the provider's raw request and response). The app waits inside its span for
LiteLLM's callbacks (they run on a worker thread after completion() returns), so the turn's
second call overwrites the first call's keys on the span, the first call's tool-call keys stay.

With CAPTURE_LITELLM_STREAM=1 (../py-litellm-otel-stream): every call streams (stream=True, the
chunks put together with litellm.stream_chunk_builder).

 turn 1: [system, user "What is the weather in Paris?"] -> get_weather({"city": "Paris"})
         -> "Sunny, 22C" -> "Result from get_weather: Sunny, 22C"
 turn 2: history [user turn 1, assistant turn 1] + user "Thanks! And in Berlin?"
         -> get_weather({"city": "Berlin"}) -> "Cloudy, 15C" -> "Result from get_weather: Cloudy, 15C"
"""
import json
import os
import time

app_span = os.environ.get("CAPTURE_LITELLM_APP_SPAN") == "1"
stream = os.environ.get("CAPTURE_LITELLM_STREAM") == "1"
os.environ.update(OTEL_EXPORTER="otlp_http", OTEL_ENDPOINT=os.environ["OTLP_HTTP_ENDPOINT"] + "/v1/traces",
                  OTEL_SERVICE_NAME=os.environ["CAPTURE_CASE"])

if app_span:
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    tp = TracerProvider(resource=Resource.create({"service.name": os.environ["CAPTURE_CASE"]}))
    tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=os.environ["OTEL_ENDPOINT"])))
    trace.set_tracer_provider(tp)
    tracer = trace.get_tracer("weather-app")

import litellm  # noqa: E402

litellm.callbacks = ["otel"]
WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
SYSTEM = "You are a concise travel assistant."


def complete(messages: list):  # noqa: ANN201
    kwargs = dict(model="openai/gpt-4o-mini", api_base=os.environ["OPENAI_BASE_URL"], api_key="sk-fake-local",
                  messages=messages, tools=TOOLS)
    if not stream:
        return litellm.completion(**kwargs).choices[0].message
    chunks = list(litellm.completion(**kwargs, stream=True))
    return litellm.stream_chunk_builder(chunks, messages=messages).choices[0].message


def turn(history: list, question: str) -> str:
    messages = [{"role": "system", "content": SYSTEM}, *history, {"role": "user", "content": question}]
    while True:
        m = complete(messages)
        if not m.tool_calls:
            return m.content
        messages.append({"role": "assistant", "content": m.content,
                         "tool_calls": [{"id": tc.id, "type": "function", "function": {
                             "name": tc.function.name, "arguments": tc.function.arguments}} for tc in m.tool_calls]})
        for tc in m.tool_calls:
            messages.append({"role": "tool", "tool_call_id": tc.id,
                             "content": WEATHER.get(json.loads(tc.function.arguments)["city"], "Unknown")})


def agent_turn(history: list, question: str) -> str:
    if not app_span:
        return turn(history, question)
    with tracer.start_as_current_span("support_agent"):
        answer = turn(history, question)
        # LiteLLM runs its success callbacks on a worker thread after completion() returns; the
        # app goes on inside its span (here: waits) so every call's attributes land on it.
        time.sleep(0.5)
        return answer


q1 = "What is the weather in Paris?"
a1 = agent_turn([], q1)
print("turn1:", a1)
a2 = agent_turn([{"role": "user", "content": q1}, {"role": "assistant", "content": a1}], "Thanks! And in Berlin?")
print("turn2:", a2)

from opentelemetry import trace as otel_trace  # noqa: E402

time.sleep(0.5)  # LiteLLM logs success callbacks from a worker thread after completion() returns
provider = otel_trace.get_tracer_provider()
if hasattr(provider, "shutdown"):
    provider.force_flush()
    provider.shutdown()
