# venv: mlflow
"""MLflow tracing exported over OTLP/HTTP (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), mlflow.openai.autolog()
tracing the OpenAI Agents SDK (MLflow's trace processor turns the SDK's traces into MLflow spans).
The Agents SDK uses the Chat Completions API of the fake model.

Agent "travel_assistant" (instructions, tools get_weather and local_expert = agent.as_tool of a
second Agent "local_expert" with its own instructions and get_weather). Each turn runs in
trace("travel", group_id="conv-mlflow-agents-1") (none with CAPTURE_MLFLOW_NO_TRACE=1:
../py-mlflow-openai-agents-sdk-notrace); turn 2 gets turn 1's result.to_input_list().
 turn 1 "What is the weather in Paris?" -> get_weather({"city": "Paris"}) -> "Sunny, 22C"
        -> "Result from get_weather: Sunny, 22C"
 turn 2 "Ask the local_expert about Berlin." -> local_expert({"input": "Ask the local_expert about Berlin."})
        nested run local_expert -> get_weather({"city": "Berlin"}) -> "Cloudy, 15C"
        -> "Result from get_weather: Cloudy, 15C"
        -> "Result from local_expert: Result from get_weather: Cloudy, 15C"
"""
import asyncio
import contextlib
import os

os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = os.environ["OTLP_HTTP_ENDPOINT"] + "/v1/traces"
os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
os.environ["OTEL_SERVICE_NAME"] = os.environ["CAPTURE_CASE"]

import mlflow  # noqa: E402
from agents import (Agent, Runner, function_tool, set_default_openai_api,  # noqa: E402
                    set_default_openai_client, trace)
from openai import AsyncOpenAI  # noqa: E402

mlflow.openai.autolog()
client = AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key="sk-fake-local")
set_default_openai_client(client, use_for_tracing=False)
set_default_openai_api("chat_completions")

WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}


@function_tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return WEATHER.get(city, "Unknown")


expert = Agent(name="local_expert", instructions="You are a local expert who knows the weather everywhere.",
               model="gpt-4o-mini", tools=[get_weather])
agent = Agent(name="travel_assistant", instructions="You are a concise travel assistant.", model="gpt-4o-mini",
              tools=[get_weather, expert.as_tool(tool_name="local_expert", tool_description="Ask the local expert")])


def turn():  # noqa: ANN201
    if os.environ.get("CAPTURE_MLFLOW_NO_TRACE") == "1":
        return contextlib.nullcontext()
    return trace("travel", group_id="conv-mlflow-agents-1")


async def main() -> None:
    with turn():
        r1 = await Runner.run(agent, "What is the weather in Paris?")
    print("turn 1:", r1.final_output)
    with turn():
        r2 = await Runner.run(agent, r1.to_input_list() + [
            {"role": "user", "content": "Ask the local_expert about Berlin."}])
    print("turn 2:", r2.final_output)


asyncio.run(main())
from mlflow.tracing.provider import provider  # noqa: E402

tp = provider.get() if hasattr(provider, "get") else None
if tp is not None and hasattr(tp, "shutdown"):
    tp.shutdown()
