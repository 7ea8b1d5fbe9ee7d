"""Building and sending OTLP with the OpenTelemetry SDK's own exporters (the real clients)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Tracer, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter


def span_exporter(transport: str, *, grpc_endpoint: str = "", http_url: str = "", **kwargs: object) -> SpanExporter:
    if transport == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        kwargs.setdefault("insecure", True)
        return GrpcExporter(endpoint=grpc_endpoint, **kwargs)  # type: ignore[arg-type]
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    return HttpExporter(endpoint=http_url.rstrip("/") + "/v1/traces", **kwargs)  # type: ignore[arg-type]


def log_exporter(transport: str, *, grpc_endpoint: str = "", http_url: str = "", **kwargs: object) -> object:
    if transport == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs

        kwargs.setdefault("insecure", True)
        return GrpcLogs(endpoint=grpc_endpoint, **kwargs)  # type: ignore[arg-type]
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogs

    return HttpLogs(endpoint=http_url.rstrip("/") + "/v1/logs", **kwargs)  # type: ignore[arg-type]


@contextlib.contextmanager
def tracer(exporter: SpanExporter, service: str = "test-agent") -> Iterator[Tracer]:
    """A tracer whose spans are exported synchronously when they end; flushed on exit."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        yield provider.get_tracer("tests.agent", "1.2.3")
    finally:
        provider.shutdown()


def agent_trace(t: Tracer, user: str = "What is the weather in Paris?", answer: str = "Sunny, 22C") -> None:
    """An agent-shaped trace: invoke_agent > chat, execute_tool, chat (GenAI conventions)."""
    import json

    inp = json.dumps([{"role": "user", "parts": [{"type": "text", "content": user}]}])
    out = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}])
    with t.start_as_current_span(
        "invoke_agent weather",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "weather",
            "gen_ai.conversation.id": "conv-1",
            "gen_ai.input.messages": inp,
            "gen_ai.output.messages": out,
        },
    ):
        with t.start_as_current_span(
            "chat gpt-4o-mini", attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"}
        ):
            pass
        with t.start_as_current_span(
            "execute_tool get_weather",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"},
        ):
            pass
        with t.start_as_current_span(
            "chat gpt-4o-mini", attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"}
        ):
            pass


SpanBuilder = Callable[[Tracer], None]
