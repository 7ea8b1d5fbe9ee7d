"""Live instrumentation tests: per-test OTel SDK providers exporting to the daemon, and run look-ups.

:class:`Telemetry` owns one TracerProvider and one LoggerProvider (never the global ones), each
exporting synchronously to the daemon with the SDK's OTLP exporters and also to memory, so a
failing test can show what the library really emitted next to what the daemon rebuilt
(:meth:`Telemetry.describe`, :meth:`Telemetry.local_runs`).
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from support.daemon import DaemonProcess, wait_for
from support.otlp import log_exporter, span_exporter


class Telemetry:
    """Tracer + logger providers for one test, exporting to ``daemon`` over ``transport``."""

    def __init__(self, daemon: DaemonProcess, service: str, transport: str = "grpc") -> None:
        resource = Resource.create({"service.name": service})
        endpoints = {"grpc_endpoint": daemon.grpc_endpoint, "http_url": daemon.http_url}
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter(transport, **endpoints)))
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.logs = InMemoryLogRecordExporter()
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter(transport, **endpoints)))  # type: ignore[arg-type]
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))

    def flush(self) -> None:
        self.tracer_provider.force_flush()
        self.logger_provider.force_flush()

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def trace_ids(self) -> list[str]:
        """Trace ids of the finished spans, in order of first appearance."""
        seen: dict[str, None] = {}
        for s in sorted(self.finished(), key=lambda s: s.start_time or 0):
            seen.setdefault(format(s.context.trace_id, "032x"), None)
        return list(seen)

    def describe(self) -> str:
        """Every span (and log record) the library emitted, with its attributes: for failure messages."""
        lines = []
        for s in self.finished():
            parent = format(s.parent.span_id, "016x") if s.parent else "-"
            lines.append(
                f"span {s.name!r} id={format(s.context.span_id, '016x')} parent={parent} "
                f"attrs={json.dumps(dict(s.attributes or {}), default=str)}"
            )
            for e in s.events:
                lines.append(f"  event {e.name!r} {json.dumps(dict(e.attributes or {}), default=str)}")
        for rec in self.logs.get_finished_logs():
            lr = rec.log_record
            lines.append(
                f"log {getattr(lr, 'event_name', None)!r} span={format(lr.span_id or 0, '016x')} "
                f"attrs={json.dumps(dict(lr.attributes or {}), default=str)} body={lr.body!r}"
            )
        return "\n".join(lines)

    def local_runs(self) -> list[dict[str, Any]]:
        """The same data through the real OTLP encoding/decoding and ``extract_runs``, in-process."""
        from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        from tracescorer.conventions import extract_runs
        from tracescorer.receiver.decode import decode_logs_protobuf, decode_traces_protobuf

        spans = decode_traces_protobuf(encode_spans(self.finished()).SerializeToString()).spans
        finished_logs = list(self.logs.get_finished_logs())
        logs = decode_logs_protobuf(encode_logs(finished_logs).SerializeToString()).records if finished_logs else []
        return sorted((r.to_dict() for r in extract_runs(spans, logs).runs), key=lambda r: r["started_at"])


def daemon_runs(daemon: DaemonProcess, *args: str) -> list[dict[str, Any]]:
    """``tracescorer runs --format jsonl ARGS`` through the real CLI, parsed."""
    out = daemon.cli("runs", "--format", "jsonl", *args).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def wait_runs(
    daemon: DaemonProcess, telemetry: Telemetry, count: int, *, timeout_s: float = 15.0
) -> list[dict[str, Any]]:
    """Poll the daemon until it lists ``count`` runs of the traces ``telemetry`` emitted.

    Returns them ordered by start time. On timeout the error shows what the daemon has, the traces
    it could not read, and every span / log record the library emitted.
    """
    telemetry.flush()
    traces = set(telemetry.trace_ids())
    last: list[dict[str, Any]] = []

    def enough() -> bool:
        nonlocal last
        last = [r for r in daemon.runs() if r["trace_id"] in traces]  # in-process: cheap to poll
        return len(last) >= count

    try:
        wait_for(enough, timeout_s, interval_s=0.2, what=f"{count} runs of {len(traces)} traces")
    except TimeoutError as exc:
        unmatched = daemon.cli("runs", "--unmatched", check=False)
        raise AssertionError(
            f"{exc}; daemon has {json.dumps(last, indent=1)}\nunmatched: {unmatched.stdout}"
            f"{unmatched.stderr}\nemitted:\n{telemetry.describe()}"
        ) from None
    return sorted(last, key=lambda r: r["started_at"])


# -- reading runs ------------------------------------------------------------------------------


def texts(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(role, content)`` of the messages that have text."""
    return [(m["role"], m["content"]) for m in messages if m.get("content")]


def final_text(run: dict[str, Any]) -> str | None:
    with_text = [m["content"] for m in run["output"] if m["role"] == "assistant" and m.get("content")]
    return with_text[-1] if with_text else None


def output_tool_call_parts(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for m in run["output"] for p in m.get("parts", []) if p.get("type") == "tool_call"]


# -- library imports ---------------------------------------------------------------------------


def import_openai_v2_instrumentor() -> Any:
    """``opentelemetry.instrumentation.openai_v2.OpenAIInstrumentor``, or a clear failure.

    opentelemetry-instrumentation-openai-v2 2.4b0 needs an opentelemetry-util-genai that still has
    ``opentelemetry.util.genai.instruments`` and ``TelemetryHandler.start_inference`` (0.4b0 to
    1.1b0); util-genai 1.2b0 dropped the first and 1.3b0 both, so with those the instrumentor
    cannot be imported, or raises on every chat call.
    """
    import importlib.metadata as md

    import pytest

    try:
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
        from opentelemetry.util.genai.handler import TelemetryHandler
    except ImportError as exc:
        pytest.fail(
            f"opentelemetry-instrumentation-openai-v2 {md.version('opentelemetry-instrumentation-openai-v2')} "
            f"cannot be imported with opentelemetry-util-genai {md.version('opentelemetry-util-genai')}: "
            f"{exc} (pin opentelemetry-util-genai==1.1b0)"
        )
    if not hasattr(TelemetryHandler, "start_inference"):
        pytest.fail(
            "opentelemetry-util-genai lacks TelemetryHandler.start_inference, which "
            "opentelemetry-instrumentation-openai-v2 calls (pin opentelemetry-util-genai==1.1b0)"
        )
    return OpenAIInstrumentor
