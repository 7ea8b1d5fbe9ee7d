# venv: agno
"""Agno Agent (OpenAIChat at the fake model) traced by openinference-instrumentation-agno,
exported over OTLP/HTTP protobuf.

Agent "travel_assistant" (instructions, tools get_weather and local_expert: a tool that runs a
second Agent "local_expert"), session_id "sess-agno-1", user_id "user-agno", history of earlier
runs added to the prompt (add_history_to_context with in-memory storage):
 run 1 "What is the weather in Paris?" -> get_weather({"city": "Paris"}) -> "Sunny, 22C"
       -> "Result from get_weather: Sunny, 22C"
 run 2 "Ask the local_expert about Berlin." -> local_expert({"query": ...}) -> nested run local_expert
       -> get_weather({"city": "Berlin"}) -> "Result from get_weather: Cloudy, 15C"
       -> "Result from local_expert: Result from get_weather: Cloudy, 15C"
"""
import os

from openinference.instrumentation.agno import AgnoInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

tp = TracerProvider(resource=Resource.create({"service.name": os.environ["CAPTURE_CASE"]}))
tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=os.environ["OTLP_HTTP_ENDPOINT"] + "/v1/traces")))
AgnoInstrumentor().instrument(tracer_provider=tp)

from agno.agent import Agent  # noqa: E402
from agno.db.in_memory import InMemoryDb  # noqa: E402
from agno.models.openai import OpenAIChat  # noqa: E402

WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}


def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return WEATHER.get(city, "Unknown")


def model() -> OpenAIChat:
    return OpenAIChat(id="gpt-4o-mini", base_url=os.environ["OPENAI_BASE_URL"], api_key="sk-fake-local")


expert = Agent(name="local_expert", model=model(), tools=[get_weather],
               instructions="You are a local expert who knows the weather everywhere.")


def local_expert(query: str) -> str:
    """Ask the local expert agent about a place."""
    return str(expert.run(query).content).strip()


agent = Agent(name="travel_assistant", model=model(), tools=[get_weather, local_expert], db=InMemoryDb(),
              instructions="You are a concise travel assistant.", add_history_to_context=True)
print("run 1:", agent.run("What is the weather in Paris?", session_id="sess-agno-1", user_id="user-agno").content)
print("run 2:", agent.run("Ask the local_expert about Berlin.", session_id="sess-agno-1", user_id="user-agno").content)
tp.shutdown()
