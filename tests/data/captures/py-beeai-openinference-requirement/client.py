# venv: beeai
"""BeeAI RequirementAgent (OpenAIChatModel at the fake model, through LiteLLM) traced by
openinference-instrumentation-beeai, exported over OTLP/HTTP protobuf by an SDK TracerProvider;
the session id given with openinference's using_session.

Agent "weather_agent" (tool get_weather; the agent answers through its final_answer tool, BeeAI's
default), one memory kept across two runs of one session ("sess-bee-1"):
 run 1 "What is the weather in Paris?" -> get_weather({"city": "Paris"}) -> "Sunny, 22C" -> answer
 run 2 "And in Berlin?" -> get_weather({"city": "Berlin"}) -> "Cloudy, 15C" -> answer
"""
import asyncio
import os

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

tp = TracerProvider(resource=Resource.create({"service.name": os.environ["CAPTURE_CASE"]}))
tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=os.environ["OTLP_HTTP_ENDPOINT"] + "/v1/traces")))
from openinference.instrumentation import using_session  # noqa: E402
from openinference.instrumentation.beeai import BeeAIInstrumentor  # noqa: E402

BeeAIInstrumentor().instrument(tracer_provider=tp)

from beeai_framework.adapters.openai import OpenAIChatModel  # noqa: E402
from beeai_framework.agents.requirement import RequirementAgent  # noqa: E402
from beeai_framework.memory import UnconstrainedMemory  # noqa: E402
from beeai_framework.tools import StringToolOutput, tool  # noqa: E402

WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}


@tool
def get_weather(city: str) -> StringToolOutput:
    """Get the current weather for a city.

    Args:
        city: The city to get the weather for.
    """
    return StringToolOutput(WEATHER.get(city, "Unknown"))


# A base_url makes BeeAI assume a server without tool_choice "required" (it then asks for JSON
# output instead of tool calls): the fake model serves tool calls, as OpenAI does.
llm = OpenAIChatModel(
    "gpt-4o-mini",
    api_key="sk-fake-local",
    base_url=os.environ["OPENAI_BASE_URL"],
    tool_choice_support={"required", "auto", "none", "single"},
)
agent = RequirementAgent(
    llm=llm,
    tools=[get_weather],
    memory=UnconstrainedMemory(),
    name="weather_agent",
    description="Knows the weather.",
    instructions="You are a concise weather assistant.",
)


async def main() -> None:
    with using_session("sess-bee-1"):
        first = await agent.run("What is the weather in Paris?")
        print("run1:", first.last_message.text)
        second = await agent.run("And in Berlin?")
        print("run2:", second.last_message.text)


asyncio.run(main())
tp.shutdown()
