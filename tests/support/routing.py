"""Traces routed to several daemons by trace id, as the Collector's ``loadbalancing`` exporter does
(``routing_key: traceID``): each trace's spans go to one daemon, through the SDK's OTLP exporters."""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator


def daemon_index(trace_id: int, n: int) -> int:
    """Which of ``n`` daemons a trace goes to."""
    return trace_id % n


class Acked:
    """Span ids (hex) each daemon acknowledged, and the traces sent to each."""

    def __init__(self, n: int) -> None:
        self.spans: list[set[str]] = [set() for _ in range(n)]
        self.traces: list[set[str]] = [set() for _ in range(n)]
        self.trace_spans: list[dict[str, int]] = [{} for _ in range(n)]  # acknowledged spans per trace
        self.failed = 0
        self._lock = threading.Lock()

    def add(self, index: int, spans: Sequence[ReadableSpan]) -> None:
        with self._lock:
            for s in spans:
                ctx = s.get_span_context()
                assert ctx is not None
                span_id, trace_id = f"{ctx.span_id:016x}", f"{ctx.trace_id:032x}"
                if span_id not in self.spans[index]:
                    counts = self.trace_spans[index]
                    counts[trace_id] = counts.get(trace_id, 0) + 1
                self.spans[index].add(span_id)
                self.traces[index].add(trace_id)


class RoutingExporter(SpanExporter):
    """Sends each trace's spans to ``endpoints[daemon_index(trace_id)]`` (gRPC), remembering what
    was acknowledged."""

    def __init__(self, endpoints: Sequence[str], acked: Acked, *, timeout_s: float = 10) -> None:
        self._exporters = [OTLPSpanExporter(endpoint=e, insecure=True, timeout=timeout_s) for e in endpoints]
        self.acked = acked

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        groups: dict[int, list[ReadableSpan]] = {}
        for s in spans:
            ctx = s.get_span_context()
            assert ctx is not None
            groups.setdefault(daemon_index(ctx.trace_id, len(self._exporters)), []).append(s)
        result = SpanExportResult.SUCCESS
        for index, group in sorted(groups.items()):
            if self._exporters[index].export(group) is SpanExportResult.SUCCESS:
                self.acked.add(index, group)
            else:
                self.acked.failed += len(group)
                result = SpanExportResult.FAILURE
        return result

    def shutdown(self) -> None:
        for e in self._exporters:
            e.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class SequentialTraceIds(IdGenerator):
    """Trace ids ``start, start+1, ...`` (so consecutive traces alternate between two daemons)."""

    def __init__(self, start: int) -> None:
        self._next = itertools.count(start)
        self._random = random.Random(start)

    def generate_trace_id(self) -> int:
        return next(self._next)

    def generate_span_id(self) -> int:
        return self._random.getrandbits(64) or 1


def produce_agent_traces(
    endpoint: str, acked: Acked, stop: threading.Event, index: int, *, service: str, keep_queued: bool = False
) -> None:
    """Send agent traces to ``endpoint`` through the SDK's batch processor until ``stop``,
    remembering what was acknowledged. At the end what is still queued is sent
    (``keep_queued``, the daemon lives on) or dropped (the daemon is dead)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from support.otlp import agent_trace

    provider = TracerProvider(resource=Resource.create({"service.name": f"{service}-{index}"}))
    exporter = RoutingExporter([endpoint], acked, timeout_s=5 if keep_queued else 2)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=50, max_export_batch_size=200))
    tracer = provider.get_tracer(f"tests.{service}")
    n = 0
    while not stop.is_set():
        agent_trace(tracer, user=f"question {index}-{n}", answer=f"answer {index}-{n}")
        n += 1
        if n % 20 == 0:
            stop.wait(0.005)  # let the exporter thread run
    if not keep_queued:
        exporter.shutdown()  # what is still queued goes nowhere
    provider.shutdown()
