# venv: langfuse
"""Langfuse Python SDK (OpenTelemetry-based) exporting to its own OTLP/HTTP endpoint
({LANGFUSE_HOST}/api/public/otel/v1/traces, here the capture server), as a Langfuse user writes
an agent: @observe(as_type="agent"|"tool") decorated functions, the model called through
Langfuse's OpenAI drop-in (langfuse.openai: one "OpenAI-generation" observation per call), the
session and user given with propagate_attributes (copied onto every span).

With CAPTURE_LANGFUSE_MANUAL=1 (the v3 SDK, ../py-langfuse-v3-manual-generation): the model
call is an @observe(as_type="generation") function around the plain OpenAI client that sets
model and usage with update_current_generation, and the session is set with
update_current_trace(session_id=..., user_id=...) inside the agent (on that span only).

support_agent(history, question), tools get_weather(city) and local_expert(question) — the
latter runs a second agent, weather_expert(question):
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
    LANGFUSE_HOST=os.environ["OTLP_HTTP_ENDPOINT"],
    LANGFUSE_BASE_URL=os.environ["OTLP_HTTP_ENDPOINT"],
    LANGFUSE_PUBLIC_KEY="pk-lf-local",
    LANGFUSE_SECRET_KEY="sk-lf-local",
    LANGFUSE_TRACING_ENVIRONMENT="capture",
)
manual = os.environ.get("CAPTURE_LANGFUSE_MANUAL") == "1"

from langfuse import get_client, observe  # noqa: E402

if manual:
    from openai import OpenAI  # noqa: E402
else:
    from langfuse import propagate_attributes  # noqa: E402
    from langfuse.openai import OpenAI  # noqa: E402

langfuse = get_client()
client = OpenAI()
WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}


def schema(name: str, param: str, doc: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": doc, "parameters": {
        "type": "object", "properties": {param: {"type": "string"}}, "required": [param]}}}


@observe(as_type="generation")
def call_model(messages: list, tools: list):
    response = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)
    langfuse.update_current_generation(model=response.model, usage_details={
        "input": response.usage.prompt_tokens, "output": response.usage.completion_tokens})
    return response.choices[0].message


def complete(messages: list, tools: list):
    if manual:
        return call_model(messages, tools)
    return client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools).choices[0].message


@observe(as_type="tool")
def get_weather(city: str) -> str:
    return WEATHER.get(city, "Unknown")


def run_loop(system: str, history: list, question: str, tools: dict, schemas: list) -> str:
    messages = [{"role": "system", "content": system}, *history, {"role": "user", "content": question}]
    while True:
        m = complete(messages, schemas)
        if not m.tool_calls:
            return m.content
        messages.append({"role": "assistant", "content": m.content,
                         "tool_calls": [tc.model_dump() for tc in m.tool_calls]})
        for tc in m.tool_calls:
            result = tools[tc.function.name](**json.loads(tc.function.arguments))
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": result})


@observe(as_type="agent", name="weather_expert")
def weather_expert(question: str) -> str:
    return run_loop("You are a local expert who knows the weather everywhere.", [], question,
                    {"get_weather": get_weather}, [schema("get_weather", "city", "Get the weather for a city")])


@observe(as_type="tool")
def local_expert(question: str) -> str:
    return weather_expert(question)


@observe(as_type="agent", name="support_agent")
def support_agent(history: list, question: str) -> str:
    if manual:
        langfuse.update_current_trace(session_id="sess-lf-1", user_id="user-lf")
    return run_loop("You are a concise travel assistant.", history, question,
                    {"get_weather": get_weather, "local_expert": local_expert},
                    [schema("get_weather", "city", "Get the weather for a city"),
                     schema("local_expert", "question", "Ask the local expert")])


def conversation() -> None:
    q1 = "What is the weather in Paris?"
    a1 = support_agent([], q1)
    print("run1:", a1)
    a2 = support_agent([{"role": "user", "content": q1}, {"role": "assistant", "content": a1}],
                       "Ask the local_expert about Berlin.")
    print("run2:", a2)


if manual:
    conversation()
else:
    with propagate_attributes(session_id="sess-lf-1", user_id="user-lf"):
        conversation()
langfuse.flush()
langfuse.shutdown()
