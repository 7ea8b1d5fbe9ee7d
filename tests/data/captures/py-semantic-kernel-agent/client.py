# venv: semantic-kernel
"""Semantic Kernel ChatCompletionAgent (OpenAIChatCompletion at the fake model) with Semantic
Kernel's native OpenTelemetry diagnostics (SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS
_SENSITIVE=true); spans over OTLP/gRPC, the message events as OTLP log records through an OTel
LoggingHandler on the "semantic_kernel" logger, as SK's telemetry docs set it up.

Agent "travel_assistant" (instructions, WeatherPlugin.get_weather), one ChatHistoryAgentThread:
 run 1 "What is the weather in Paris?" -> get_weather({"city": "Paris"}) -> "Sunny, 22C"
       -> "Result from WeatherPlugin-get_weather: Sunny, 22C"
 run 2 "Thanks! And in Berlin?" -> get_weather({"city": "Berlin"}) -> "Cloudy, 15C"
"""
import asyncio
import logging
import os

os.environ["SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS"] = "true"
os.environ["SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE"] = "true"

from opentelemetry import _logs, trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter  # noqa: E402
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler  # noqa: E402
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
handler = LoggingHandler(logger_provider=lp)
handler.addFilter(logging.Filter("semantic_kernel"))
logging.getLogger().addHandler(handler)
logging.getLogger().setLevel(logging.INFO)

from openai import AsyncOpenAI  # noqa: E402
from semantic_kernel.agents import ChatCompletionAgent, ChatHistoryAgentThread  # noqa: E402
from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion  # noqa: E402
from semantic_kernel.functions import kernel_function  # noqa: E402

WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}


class WeatherPlugin:
    @kernel_function(description="Get the current weather for a city.")
    def get_weather(self, city: str) -> str:
        return WEATHER.get(city, "Unknown")


async def main() -> None:
    service = OpenAIChatCompletion(ai_model_id="gpt-4o-mini", async_client=AsyncOpenAI(
        base_url=os.environ["OPENAI_BASE_URL"], api_key="sk-fake-local"))
    agent = ChatCompletionAgent(service=service, name="travel_assistant",
                                instructions="You are a concise travel assistant.", plugins=[WeatherPlugin()])
    thread = ChatHistoryAgentThread()
    for text in ("What is the weather in Paris?", "Thanks! And in Berlin?"):
        response = await agent.get_response(messages=text, thread=thread)
        thread = response.thread
        print("run:", response.content)


asyncio.run(main())
tp.shutdown()
lp.shutdown()
