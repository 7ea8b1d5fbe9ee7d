# venv: langsmith
"""LangSmith's OpenTelemetry mode (LANGSMITH_TRACING=true, LANGSMITH_OTEL_ENABLED=true,
LANGSMITH_OTEL_ONLY=true: no LangSmith API, spans only) tracing a LangGraph create_react_agent
(langchain-openai ChatOpenAI at the fake model). LangSmith builds its own TracerProvider with an
OTLP/HTTP protobuf exporter to OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/traces).

Graph "travel_assistant" (create_react_agent(name=...), prompt, tools get_weather and
local_expert: a tool that invokes a second react agent graph "local_expert"), InMemorySaver
checkpointer, thread "thread-ls-1" (the second turn gets the first from the checkpoint):
 turn 1 "What is the weather in Paris?" -> get_weather({"city": "Paris"}) -> "Sunny, 22C"
        -> "Result from get_weather: Sunny, 22C"
 turn 2 "Ask the local_expert about Berlin." -> local_expert({"query": ...}) -> nested graph local_expert
        -> get_weather({"city": "Berlin"}) -> "Result from get_weather: Cloudy, 15C"
        -> "Result from local_expert: Result from get_weather: Cloudy, 15C"
"""
import os

os.environ.update(
    LANGSMITH_TRACING="true",
    LANGSMITH_OTEL_ENABLED="true",
    LANGSMITH_OTEL_ONLY="true",
    LANGSMITH_API_KEY="lsv2-fake-local",
    LANGSMITH_PROJECT="capture",
    OTEL_EXPORTER_OTLP_ENDPOINT=os.environ["OTLP_HTTP_ENDPOINT"],
    OTEL_SERVICE_NAME=os.environ["CAPTURE_CASE"],
)

from langchain_core.tools import tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.prebuilt import create_react_agent  # noqa: E402
from langsmith import Client  # noqa: E402

WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}
llm = ChatOpenAI(model="gpt-4o-mini", base_url=os.environ["OPENAI_BASE_URL"], api_key="sk-fake-local")


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return WEATHER.get(city, "Unknown")


expert = create_react_agent(llm, [get_weather], prompt="You are a local expert who knows the weather everywhere.",
                            name="local_expert")


@tool
def local_expert(query: str) -> str:
    """Ask the local expert agent about a place."""
    return expert.invoke({"messages": [{"role": "user", "content": query}]})["messages"][-1].content


agent = create_react_agent(llm, [get_weather, local_expert], prompt="You are a concise travel assistant.",
                           name="travel_assistant", checkpointer=InMemorySaver())
config = {"configurable": {"thread_id": "thread-ls-1"}}
for text in ("What is the weather in Paris?", "Ask the local_expert about Berlin."):
    out = agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
    print("turn:", out["messages"][-1].content)

from langchain_core.tracers.langchain import wait_for_all_tracers  # noqa: E402

wait_for_all_tracers()
Client().flush()
from opentelemetry import trace  # noqa: E402

provider = trace.get_tracer_provider()
if hasattr(provider, "shutdown"):
    provider.shutdown()
