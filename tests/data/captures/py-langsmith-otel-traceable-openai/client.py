# venv: langsmith
"""LangSmith's OpenTelemetry mode (LANGSMITH_TRACING=true, LANGSMITH_OTEL_ENABLED=true,
LANGSMITH_OTEL_ONLY=true) with the agent written by hand: @traceable functions and the OpenAI
client wrapped with langsmith.wrappers.wrap_openai; the thread id given as run metadata
(thread_id) with tracing_context, as LangSmith's threads documentation shows.

support_agent(history, question) (run_type chain), tools get_weather(city) and
local_expert(question) (run_type tool) — the latter runs a second agent, weather_expert(question):
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

os.environ.update(
    LANGSMITH_TRACING="true",
    LANGSMITH_OTEL_ENABLED="true",
    LANGSMITH_OTEL_ONLY="true",
    LANGSMITH_API_KEY="lsv2-fake-local",
    LANGSMITH_PROJECT="capture",
    OTEL_EXPORTER_OTLP_ENDPOINT=os.environ["OTLP_HTTP_ENDPOINT"],
    OTEL_SERVICE_NAME=os.environ["CAPTURE_CASE"],
)

from langsmith import traceable, tracing_context  # noqa: E402
from langsmith.run_trees import get_cached_client  # noqa: E402
from langsmith.wrappers import wrap_openai  # noqa: E402
from openai import OpenAI  # noqa: E402

client = wrap_openai(OpenAI())
WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}


def schema(name: str, param: str, doc: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": doc, "parameters": {
        "type": "object", "properties": {param: {"type": "string"}}, "required": [param]}}}


@traceable(run_type="tool")
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


@traceable(run_type="chain", name="weather_expert")
def weather_expert(question: str) -> str:
    return run_loop("You are a local expert who knows the weather everywhere.", [], question,
                    {"get_weather": get_weather}, [schema("get_weather", "city", "Get the weather for a city")])


@traceable(run_type="tool")
def local_expert(question: str) -> str:
    return weather_expert(question)


@traceable(run_type="chain", name="support_agent")
def support_agent(history: list, question: str) -> str:
    return run_loop("You are a concise travel assistant.", history, question,
                    {"get_weather": get_weather, "local_expert": local_expert},
                    [schema("get_weather", "city", "Get the weather for a city"),
                     schema("local_expert", "question", "Ask the local expert")])


with tracing_context(metadata={"thread_id": "thread-ls-2"}):
    q1 = "What is the weather in Paris?"
    a1 = support_agent([], q1)
    print("run1:", a1)
    a2 = support_agent([{"role": "user", "content": q1}, {"role": "assistant", "content": a1}],
                       "Ask the local_expert about Berlin.")
    print("run2:", a2)
get_cached_client().flush()  # the client @traceable sends runs through
from opentelemetry import trace  # noqa: E402

provider = trace.get_tracer_provider()
if hasattr(provider, "shutdown"):
    provider.shutdown()
