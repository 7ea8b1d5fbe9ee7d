# venv: genai-openai-agents
"""The OpenAI Agents SDK (Chat Completions API at the fake model) traced by OpenTelemetry's own
GenAI instrumentations in the latest conventions' form (OTEL_SEMCONV_STABILITY_OPT_IN=
gen_ai_latest_experimental, content on spans): opentelemetry-instrumentation-genai-openai-agents
(invoke_workflow per agents trace, INTERNAL invoke_agent, execute_tool) over
opentelemetry-instrumentation-genai-openai (chat spans), exported over OTLP/gRPC.

Agent "travel_assistant" (instructions, tool get_weather); both turns in one
trace("trip_planner", group_id="conv-oaa-1"): one workflow above two agent runs, the conversation
id on the workflow span only. Turn 2 gets turn 1's result.to_input_list():
 turn 1 "What is the weather in Paris?" -> get_weather({"city": "Paris"}) -> "Sunny, 22C"
        -> "Result from get_weather: Sunny, 22C"
 turn 2 "And in Berlin?" -> get_weather({"city": "Berlin"}) -> "Cloudy, 15C"
        -> "Result from get_weather: Cloudy, 15C"
"""
import asyncio
import os

os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor  # noqa: E402
from opentelemetry.instrumentation.genai.openai_agents import OpenAIAgentsInstrumentor  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

tp = TracerProvider(resource=Resource.create({"service.name": os.environ["CAPTURE_CASE"]}))
tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=os.environ["OTLP_GRPC_ENDPOINT"], insecure=True)))
OpenAIAgentsInstrumentor().instrument(tracer_provider=tp, disable_openai_trace_export=True)
OpenAIInstrumentor().instrument(tracer_provider=tp)

from agents import Agent, Runner, function_tool, set_default_openai_api, set_default_openai_client, trace  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

set_default_openai_client(AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key="sk-fake-local"),
                          use_for_tracing=False)
set_default_openai_api("chat_completions")
WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}


@function_tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return WEATHER.get(city, "Unknown")


agent = Agent(name="travel_assistant", instructions="You are a concise travel assistant.", model="gpt-4o-mini",
              tools=[get_weather])


async def main() -> None:
    with trace("trip_planner", group_id="conv-oaa-1"):
        r1 = await Runner.run(agent, "What is the weather in Paris?")
        print("turn 1:", r1.final_output)
        r2 = await Runner.run(agent, r1.to_input_list() + [{"role": "user", "content": "And in Berlin?"}])
        print("turn 2:", r2.final_output)


asyncio.run(main())
tp.shutdown()
