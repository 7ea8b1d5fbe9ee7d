# venv: langfuse
"""Langfuse's LangChain callback handler (langfuse.langchain.CallbackHandler, Langfuse SDK v5,
OpenTelemetry-based, OTLP/HTTP to {LANGFUSE_HOST}/api/public/otel/v1/traces) on a LangGraph
create_react_agent (langchain-openai ChatOpenAI at the fake model); the session given as the
run's metadata langfuse_session_id / langfuse_user_id, as Langfuse documents.

Graph "travel_assistant" (prompt, tools get_weather and local_expert: a tool that invokes a
second react agent graph "local_expert"), InMemorySaver checkpointer, thread "thread-lf-1":
 turn 1 "What is the weather in Paris?" -> get_weather({"city": "Paris"}) -> "Sunny, 22C"
        -> "Result from get_weather: Sunny, 22C"
 turn 2 "Ask the local_expert about Berlin." -> local_expert({"query": ...}) -> nested graph local_expert
        -> get_weather({"city": "Berlin"}) -> "Result from get_weather: Cloudy, 15C"
        -> "Result from local_expert: Result from get_weather: Cloudy, 15C"
"""
import os

os.environ.update(
    LANGFUSE_HOST=os.environ["OTLP_HTTP_ENDPOINT"],
    LANGFUSE_BASE_URL=os.environ["OTLP_HTTP_ENDPOINT"],
    LANGFUSE_PUBLIC_KEY="pk-lf-local",
    LANGFUSE_SECRET_KEY="sk-lf-local",
)

from langchain_core.tools import tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langfuse import get_client  # noqa: E402
from langfuse.langchain import CallbackHandler  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.prebuilt import create_react_agent  # noqa: E402

langfuse = get_client()
handler = CallbackHandler()
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
config = {"configurable": {"thread_id": "thread-lf-1"}, "callbacks": [handler],
          "metadata": {"langfuse_session_id": "sess-lf-lg-1", "langfuse_user_id": "user-lf"}}
for text in ("What is the weather in Paris?", "Ask the local_expert about Berlin."):
    out = agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
    print("turn:", out["messages"][-1].content)
langfuse.flush()
langfuse.shutdown()
