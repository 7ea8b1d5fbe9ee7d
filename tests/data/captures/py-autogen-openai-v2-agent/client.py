# venv: autogen
"""AutoGen AgentChat AssistantAgent (autogen-ext OpenAIChatCompletionClient at the fake model)
with AutoGen's own tracing plus opentelemetry-instrumentation-openai-v2 (latest GenAI conventions, content on spans),
exported over OTLP/gRPC (a log exporter is set up too; this mode sends no log records).

AssistantAgent "travel_assistant" (system message, tools get_weather and AgentTool(local_expert),
reflect_on_tool_use=True); the same agent object keeps its model context across the two runs:
 run 1 "What is the weather in Paris?" -> get_weather({"city": "Paris"}) -> "Sunny, 22C"
       -> "Result from get_weather: Sunny, 22C"
 run 2 "Ask the local_expert about Berlin." -> local_expert({"task": ...}) -> nested run of the
       AssistantAgent "local_expert" (its own system message, tool get_weather)
       -> get_weather({"city": "Berlin"}) -> "Result from get_weather: Cloudy, 15C"
       -> "Result from local_expert: ..."
"""
import asyncio
import os

os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"

from opentelemetry import _logs, trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter  # noqa: E402
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor  # noqa: E402
from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

resource = Resource.create({"service.name": os.environ["CAPTURE_CASE"]})
tp = TracerProvider(resource=resource)
tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=os.environ["OTLP_GRPC_ENDPOINT"], insecure=True)))
trace.set_tracer_provider(tp)
lp = LoggerProvider(resource=resource)
lp.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=os.environ["OTLP_GRPC_ENDPOINT"], insecure=True)))
_logs.set_logger_provider(lp)
OpenAIInstrumentor().instrument(tracer_provider=tp, logger_provider=lp)

from autogen_agentchat.agents import AssistantAgent  # noqa: E402
from autogen_agentchat.tools import AgentTool  # noqa: E402
from autogen_ext.models.openai import OpenAIChatCompletionClient  # noqa: E402

WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}


async def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return WEATHER.get(city, "Unknown")


async def main() -> None:
    client = OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=os.environ["OPENAI_BASE_URL"],
                                        api_key="sk-fake-local",
                                        model_info={"vision": False, "function_calling": True, "json_output": False,
                                                    "family": "gpt-4o", "structured_output": False})
    expert = AssistantAgent("local_expert", model_client=client, tools=[get_weather],
                            description="Knows the weather everywhere.",
                            system_message="You are a local expert who knows the weather everywhere.",
                            reflect_on_tool_use=True)
    agent = AssistantAgent("travel_assistant", model_client=client, tools=[get_weather, AgentTool(expert)],
                           system_message="You are a concise travel assistant.", reflect_on_tool_use=True)
    for text in ("What is the weather in Paris?", "Ask the local_expert about Berlin."):
        result = await agent.run(task=text)
        print("run:", result.messages[-1].content)
    await client.close()


asyncio.run(main())
tp.shutdown()
lp.shutdown()
