# venv: adk
"""Google ADK with its own OpenTelemetry spans, model through ADK's LiteLlm wrapper
("openai/gpt-4o-mini", api_base = the fake model), exported over OTLP/gRPC by an SDK
TracerProvider. Telemetry schema: the legacy one (ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1:
gcp.vertex.agent.* JSON, call_llm spans) unless CAPTURE_ADK_SCHEMA=2 (the semconv-aligned one,
with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY).

LlmAgent "travel_assistant" (instruction, tools get_weather and AgentTool(local_expert)),
InMemoryRunner session "sess-adk-1" of user "user-adk":
 turn 1 "What is the weather in Paris?" -> get_weather({"city": "Paris"}) -> {"result": "Sunny, 22C"}
        -> "Result from get_weather: {\"result\": \"Sunny, 22C\"}"
 turn 2 "Ask the local_expert about Berlin." -> local_expert({"request": "Ask the local_expert about Berlin."})
        nested run (AgentTool: its own session) local_expert -> get_weather({"city": "Berlin"})
        -> "Result from get_weather: {\"result\": \"Cloudy, 15C\"}"
        -> "Result from local_expert: ..."
"""
import asyncio
import os

schema = os.environ.get("CAPTURE_ADK_SCHEMA", "1")
if schema == "1":
    os.environ["ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN"] = "1"
else:
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"

from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

tp = TracerProvider(resource=Resource.create({"service.name": os.environ["CAPTURE_CASE"]}))
tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=os.environ["OTLP_GRPC_ENDPOINT"], insecure=True)))
trace.set_tracer_provider(tp)

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.models.lite_llm import LiteLlm  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.adk.tools.agent_tool import AgentTool  # noqa: E402
from google.genai import types  # noqa: E402

WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}


def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return WEATHER.get(city, "Unknown")


def model() -> LiteLlm:
    return LiteLlm(model="openai/gpt-4o-mini", api_base=os.environ["OPENAI_BASE_URL"], api_key="sk-fake-local")


expert = LlmAgent(name="local_expert", model=model(), description="Knows the weather everywhere.",
                  instruction="You are a local expert who knows the weather everywhere.", tools=[get_weather])
agent = LlmAgent(name="travel_assistant", model=model(), instruction="You are a concise travel assistant.",
                 tools=[get_weather, AgentTool(agent=expert)])


async def main() -> None:
    runner = InMemoryRunner(agent=agent, app_name="travel")
    await runner.session_service.create_session(app_name="travel", user_id="user-adk", session_id="sess-adk-1")
    for text in ("What is the weather in Paris?", "Ask the local_expert about Berlin."):
        final = ""
        async for event in runner.run_async(user_id="user-adk", session_id="sess-adk-1",
                                            new_message=types.Content(role="user", parts=[types.Part(text=text)])):
            if event.is_final_response() and event.content and event.content.parts:
                final = "".join(p.text or "" for p in event.content.parts)
        print("turn:", final)


asyncio.run(main())
tp.shutdown()
