# venv: smolagents
"""smolagents CodeAgent (OpenAIServerModel at the fake model, which writes code for code agents)
traced by openinference-instrumentation-smolagents, exported over OTLP/gRPC by an SDK
TracerProvider; the session id given with openinference's using_session.

Agent "weather_coder" (tool get_weather and the managed CodeAgent "local_expert" with
get_weather), one conversation (session "sess-smol-code-1") of two tasks, the second with
reset=False. Each task: the model writes `result = <tool>(...)`, then
`final_answer(f"Result from <tool>: {result}")`:
 task 1 "What is the weather in Paris?" -> get_weather(city="Paris") -> "Sunny, 22C"
        -> final_answer("Result from get_weather: Sunny, 22C")
 task 2 "Ask the local_expert about Berlin." -> local_expert(task="Ask the local_expert about Berlin.")
        nested run local_expert -> get_weather(city="Berlin") -> final_answer("Result from get_weather: Cloudy, 15C")
        -> final_answer("Result from local_expert: <the managed agent's report>")
The run's answer is the final_answer call's argument (called from code: no tool call in the
model's output).
"""
import os

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

tp = TracerProvider(resource=Resource.create({"service.name": os.environ["CAPTURE_CASE"]}))
tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=os.environ["OTLP_GRPC_ENDPOINT"], insecure=True)))
from openinference.instrumentation import using_session  # noqa: E402
from openinference.instrumentation.smolagents import SmolagentsInstrumentor  # noqa: E402

SmolagentsInstrumentor().instrument(tracer_provider=tp)

from smolagents import CodeAgent, OpenAIServerModel, tool  # noqa: E402

WEATHER = {"Paris": "Sunny, 22C", "Berlin": "Cloudy, 15C"}
model = OpenAIServerModel(model_id="gpt-4o-mini", api_base=os.environ["OPENAI_BASE_URL"], api_key="sk-fake-local")


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city to get the weather for.
    """
    return WEATHER.get(city, "Unknown")


expert = CodeAgent(tools=[get_weather], model=model, name="local_expert",
                   description="A local expert who knows the weather everywhere.", max_steps=4)
agent = CodeAgent(tools=[get_weather], model=model, managed_agents=[expert], name="weather_coder", max_steps=4)
with using_session("sess-smol-code-1"):
    print("task1:", agent.run("What is the weather in Paris?"))
    print("task2:", agent.run("Ask the local_expert about Berlin.", reset=False))
tp.shutdown()
