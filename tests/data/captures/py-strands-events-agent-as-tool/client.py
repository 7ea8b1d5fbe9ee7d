# venv: strands
"""Strands Agents with its own telemetry (StrandsTelemetry, OTLP/HTTP protobuf), OpenAI model
provider pointed at the fake model. Default (legacy) GenAI mode unless CAPTURE_STRANDS_LATEST=1
(then OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental, the latest-conventions case).

Agent "travel_assistant" (system prompt, tools get_weather and local_expert), session "sess-strands-1"
via trace_attributes. local_expert is agent-as-tool: it runs a second Agent "local_expert"
(its own system prompt, tool get_weather) inside the tool.
 turn 1 "What is the weather in Paris?" -> get_weather({"city": "Paris"}) -> "Sunny, 22C"
        -> "Result from get_weather: Sunny, 22C"
 turn 2 "Ask the local_expert about Berlin."
        -> local_expert({"query": "Ask the local_expert about Berlin."})
           nested run: local_expert gets that text -> get_weather({"city": "Berlin"}) -> "Cloudy, 15C"
           -> "Result from get_weather: Cloudy, 15C"
        -> "Result from local_expert: Result from get_weather: Cloudy, 15C"
"""
import os

if os.environ.get("CAPTURE_STRANDS_LATEST") == "1":
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"

from strands import Agent, tool  # noqa: E402
from strands.models.openai import OpenAIModel  # noqa: E402
from strands.telemetry import StrandsTelemetry  # noqa: E402

os.environ["OTEL_SERVICE_NAME"] = os.environ["CAPTURE_CASE"]
telemetry = StrandsTelemetry().setup_otlp_exporter(endpoint=os.environ["OTLP_HTTP_ENDPOINT"] + "/v1/traces")

model = OpenAIModel(client_args={"base_url": os.environ["OPENAI_BASE_URL"], "api_key": "sk-fake-local"},
                    model_id="gpt-4o-mini")
WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return WEATHER.get(city, "Unknown")


@tool
def local_expert(query: str) -> str:
    """Ask the local expert agent about a place."""
    expert = Agent(name="local_expert", model=model, tools=[get_weather], callback_handler=None,
                   system_prompt="You are a local expert who knows the weather everywhere.",
                   trace_attributes={"session.id": "sess-strands-1"})
    return str(expert(query)).strip()


agent = Agent(name="travel_assistant", model=model, tools=[get_weather, local_expert], callback_handler=None,
              system_prompt="You are a concise travel assistant.",
              trace_attributes={"session.id": "sess-strands-1", "user.id": "user-strands"})
print("turn 1:", str(agent("What is the weather in Paris?")).strip())
print("turn 2:", str(agent("Ask the local_expert about Berlin.")).strip())
telemetry.tracer_provider.shutdown()
