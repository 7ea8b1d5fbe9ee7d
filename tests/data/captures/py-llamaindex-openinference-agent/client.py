# venv: llamaindex
"""LlamaIndex FunctionAgent (llama-index-llms-openai's OpenAI LLM at the fake model) traced by
openinference-instrumentation-llama-index, exported over OTLP/HTTP protobuf.

FunctionAgent "travel_assistant" (system prompt, tools get_weather and local_expert: a tool that
runs a second FunctionAgent "local_expert"); one ChatMemoryBuffer across two runs (the second
sees the first turn as memory), inside using_session("sess-li-1"):
 run 1 "What is the weather in Paris?" -> get_weather({"city": "Paris"}) -> "Sunny, 22C"
       -> "Result from get_weather: Sunny, 22C"
 run 2 "Ask the local_expert about Berlin." -> local_expert({"query": ...}) -> nested run local_expert
       -> get_weather({"city": "Berlin"}) -> "Result from get_weather: Cloudy, 15C"
       -> "Result from local_expert: Result from get_weather: Cloudy, 15C"
"""
import asyncio
import os

from openinference.instrumentation import using_session
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

tp = TracerProvider(resource=Resource.create({"service.name": os.environ["CAPTURE_CASE"]}))
tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=os.environ["OTLP_HTTP_ENDPOINT"] + "/v1/traces")))
LlamaIndexInstrumentor().instrument(tracer_provider=tp)

from llama_index.core.agent.workflow import FunctionAgent  # noqa: E402
from llama_index.core.memory import ChatMemoryBuffer  # noqa: E402
from llama_index.llms.openai import OpenAI  # noqa: E402

WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}


def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return WEATHER.get(city, "Unknown")


def llm() -> OpenAI:
    return OpenAI(model="gpt-4o-mini", api_base=os.environ["OPENAI_BASE_URL"], api_key="sk-fake-local")


expert = FunctionAgent(name="local_expert", description="Knows the weather everywhere", tools=[get_weather],
                       llm=llm(), system_prompt="You are a local expert who knows the weather everywhere.")


async def local_expert(query: str) -> str:
    """Ask the local expert agent about a place."""
    return str(await expert.run(query)).strip()


agent = FunctionAgent(name="travel_assistant", description="Travel help", tools=[get_weather, local_expert],
                      llm=llm(), system_prompt="You are a concise travel assistant.")


async def main() -> None:
    memory = ChatMemoryBuffer.from_defaults()
    with using_session("sess-li-1"):
        print("run 1:", await agent.run("What is the weather in Paris?", memory=memory))
        print("run 2:", await agent.run("Ask the local_expert about Berlin.", memory=memory))


asyncio.run(main())
tp.shutdown()
