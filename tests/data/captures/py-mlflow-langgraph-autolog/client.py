# venv: mlflow
"""MLflow tracing exported over OTLP/HTTP (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), mlflow.langchain.autolog()
tracing a LangGraph create_react_agent (langchain-openai ChatOpenAI at the fake model).

Graph "travel_assistant" (create_react_agent(name=...), prompt, tools get_weather and
local_expert: a tool that invokes a second react agent graph "local_expert"), InMemorySaver
checkpointer, thread "thread-mlflow-lg-1" (the second turn gets the first from the checkpoint):
 turn 1 "What is the weather in Paris?" -> get_weather({"city": "Paris"}) -> "Sunny, 22C"
        -> "Result from get_weather: Sunny, 22C"
 turn 2 "Ask the local_expert about Berlin." -> local_expert({"query": ...}) -> nested graph local_expert
        -> get_weather({"city": "Berlin"}) -> "Result from get_weather: Cloudy, 15C"
        -> "Result from local_expert: Result from get_weather: Cloudy, 15C"
"""
import os

os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = os.environ["OTLP_HTTP_ENDPOINT"] + "/v1/traces"
os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
os.environ["OTEL_SERVICE_NAME"] = os.environ["CAPTURE_CASE"]

import mlflow  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.prebuilt import create_react_agent  # noqa: E402

mlflow.langchain.autolog()
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
config = {"configurable": {"thread_id": "thread-mlflow-lg-1"}}
for text in ("What is the weather in Paris?", "Ask the local_expert about Berlin."):
    out = agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
    print("turn:", out["messages"][-1].content)
from mlflow.tracing.provider import provider  # noqa: E402

tp = provider.get() if hasattr(provider, "get") else None
if tp is not None and hasattr(tp, "shutdown"):
    tp.shutdown()
