# venv: crewai
"""A CrewAI crew (LLM at the fake model through CrewAI's OpenAI provider) traced by
openinference-instrumentation-crewai with openinference-instrumentation-openai for the model
calls, exported over OTLP/gRPC by an SDK TracerProvider; the session id given with
openinference's using_session.

Crew "Weather Crew", two agents run in sequence:
 task "forecast" (agent role "Weather Researcher", tool get_weather):
     "Find the current weather in Paris." -> get_weather({"city": "Paris"}) -> "Sunny, 22C" -> answer
 task without a name (agent role "Travel Writer", no tools): "Write one line for travellers."
The instrumentation names each task's AGENT span after the agent's role and the method
(<role>.<task name>._execute_core, <role>._execute_core): the runs are named after the role.
"""
import os

os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"  # CrewAI's own telemetry (not the capture's)
os.environ["CREWAI_TRACING_ENABLED"] = "false"
os.environ["OTEL_SDK_DISABLED"] = "false"

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

tp = TracerProvider(resource=Resource.create({"service.name": os.environ["CAPTURE_CASE"]}))
tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=os.environ["OTLP_GRPC_ENDPOINT"], insecure=True)))
from openinference.instrumentation import using_session  # noqa: E402
from openinference.instrumentation.crewai import CrewAIInstrumentor  # noqa: E402
from openinference.instrumentation.openai import OpenAIInstrumentor  # noqa: E402

CrewAIInstrumentor().instrument(tracer_provider=tp)
OpenAIInstrumentor().instrument(tracer_provider=tp)

from crewai import LLM, Agent, Crew, Process, Task  # noqa: E402
from crewai.tools import tool  # noqa: E402

WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}


@tool("get_weather")
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return WEATHER.get(city, "Unknown")


llm = LLM(model="openai/gpt-4o-mini", base_url=os.environ["OPENAI_BASE_URL"], api_key="sk-fake-local")
researcher = Agent(
    role="Weather Researcher",
    goal="Find the current weather.",
    backstory="You check the weather for travellers.",
    tools=[get_weather],
    llm=llm,
    allow_delegation=False,
    max_iter=3,
)
writer = Agent(
    role="Travel Writer",
    goal="Write short travel notes.",
    backstory="You write one-line notes.",
    llm=llm,
    allow_delegation=False,
    max_iter=2,
)
forecast = Task(
    name="forecast",
    description="Find the current weather in Paris.",
    expected_output="The weather in Paris.",
    agent=researcher,
)
note = Task(description="Write one line for travellers.", expected_output="One line.", agent=writer)
crew = Crew(name="Weather Crew", agents=[researcher, writer], tasks=[forecast, note], process=Process.sequential)
with using_session("sess-crew-1"):
    print("crew:", crew.kickoff())
tp.shutdown()
