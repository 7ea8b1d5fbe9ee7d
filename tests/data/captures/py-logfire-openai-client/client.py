# venv: logfire
"""pydantic Logfire instrumenting the OpenAI client alone (logfire.instrument_openai), exported
over OTLP/HTTP protobuf (send_to_logfire=False); the app's own tool loop runs inside a Logfire
span per turn (not an agent span any convention knows), tagged with the conversation.

Conversation "conv-lfo-1", two turns, each a tool loop with chat.completions:
 turn 1 [system, user "What is the weather in Paris?"] -> get_weather({"city": "Paris"}) -> "Sunny, 22C"
        -> "Result from get_weather: Sunny, 22C"
 turn 2 history [user turn 1, assistant answer 1], "And in Berlin?" -> get_weather({"city": "Berlin"})
        -> "Cloudy, 15C" -> "Result from get_weather: Cloudy, 15C"
"""
import json
import os

os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = os.environ["OTLP_HTTP_ENDPOINT"]
os.environ["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf"

import logfire  # noqa: E402
from openai import OpenAI  # noqa: E402

logfire.configure(send_to_logfire=False, service_name=os.environ["CAPTURE_CASE"], console=False)
client = OpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key="sk-fake-local")
logfire.instrument_openai(client)

SYSTEM = "You are a concise travel assistant."
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}


def turn(history: list, question: str) -> str:
    messages = [{"role": "system", "content": SYSTEM}, *history, {"role": "user", "content": question}]
    with logfire.span("weather turn {question}", question=question, conversation_id="conv-lfo-1"):
        while True:
            msg = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS).choices[0].message
            if not msg.tool_calls:
                return msg.content or ""
            messages.append(msg.model_dump(exclude_none=True))
            for tc in msg.tool_calls:
                messages.append({"role": "tool", "tool_call_id": tc.id,
                                 "content": WEATHER.get(json.loads(tc.function.arguments)["city"], "Unknown")})


q1 = "What is the weather in Paris?"
a1 = turn([], q1)
print("turn 1:", a1)
print("turn 2:", turn([{"role": "user", "content": q1}, {"role": "assistant", "content": a1}], "And in Berlin?"))
logfire.shutdown()
