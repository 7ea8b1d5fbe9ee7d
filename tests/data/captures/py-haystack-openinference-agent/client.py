# venv: haystack
"""Haystack Agent (OpenAIChatGenerator at the fake model) inside a Pipeline, traced by
openinference-instrumentation-haystack, exported over OTLP/HTTP protobuf.

Pipeline with one component "agent": Agent(system_prompt, tools [get_weather]); each run gets
the conversation so far as ChatMessages; using_session("sess-hay-1"):
 run 1 "What is the weather in Paris?" -> get_weather({"city": "Paris"}) -> "Sunny, 22C"
       -> "Result from get_weather: Sunny, 22C"
 run 2 (history: run 1's user turn and final answer) "Thanks! And in Berlin?"
       -> get_weather({"city": "Berlin"}) -> "Cloudy, 15C" -> "Result from get_weather: Cloudy, 15C"
"""
import os

from openinference.instrumentation import using_session
from openinference.instrumentation.haystack import HaystackInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

tp = TracerProvider(resource=Resource.create({"service.name": os.environ["CAPTURE_CASE"]}))
tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=os.environ["OTLP_HTTP_ENDPOINT"] + "/v1/traces")))
HaystackInstrumentor().instrument(tracer_provider=tp)

from haystack import Pipeline  # noqa: E402
from haystack.components.agents import Agent  # noqa: E402
from haystack.components.generators.chat import OpenAIChatGenerator  # noqa: E402
from haystack.dataclasses import ChatMessage  # noqa: E402
from haystack.tools import create_tool_from_function  # noqa: E402
from haystack.utils import Secret  # noqa: E402

WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}


def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return WEATHER.get(city, "Unknown")


agent = Agent(chat_generator=OpenAIChatGenerator(model="gpt-4o-mini", api_base_url=os.environ["OPENAI_BASE_URL"],
                                                 api_key=Secret.from_token("sk-fake-local")),
              tools=[create_tool_from_function(get_weather)], system_prompt="You are a concise travel assistant.")
pipe = Pipeline()
pipe.add_component("agent", agent)
history: list[ChatMessage] = []
with using_session("sess-hay-1"):
    for text in ("What is the weather in Paris?", "Thanks! And in Berlin?"):
        turn = ChatMessage.from_user(text)
        out = pipe.run({"agent": {"messages": [*history, turn]}})
        answer = out["agent"]["messages"][-1].text
        print("run:", answer)
        history += [turn, ChatMessage.from_assistant(answer)]
tp.shutdown()
