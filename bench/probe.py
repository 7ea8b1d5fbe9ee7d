"""A time-to-score probe for the benchmarks: an agent trace that ends now, sent every ``every_s``
beside the load, scored by a binding of its own (:data:`BINDING`, filtered to the probe's agent).

Why: the reference load generator's spans carry fixed times (October 2025, so the walk baseline
sends the very same bytes), so the time to score of its own runs (``tracescorer_time_to_score_seconds``)
reads a year; the probe's runs go through the same feed, assembly and scoring queues under the load,
and their binding's histogram is the time to score a user would see.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import set_span_in_context

AGENT = "tts-probe"
BINDING = {"id": "time-to-score", "prebuilt": "non_empty_response", "filter": {"agent_name": AGENT}}
_OUTPUT = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "probe"}]}])


class _Collect(SpanProcessor):
    """Keeps the ended spans, so that a probe's spans go out in one export (all or nothing)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


class Probe(threading.Thread):
    """Sends a probe run to the OTLP gRPC ``endpoint`` every ``every_s`` until :meth:`finish`."""

    def __init__(self, endpoint: str, every_s: float = 0.5) -> None:
        super().__init__(name="tts-probe", daemon=True)
        self._exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=10)
        self._collect = _Collect()
        provider = TracerProvider()
        provider.add_span_processor(self._collect)
        self._tracer = provider.get_tracer("bench.probe")
        self._every_s = every_s
        self._halt = threading.Event()
        self.sent = 0  # probes acknowledged: each is one run
        self.failed = 0

    def run(self) -> None:
        while not self._halt.wait(self._every_s):
            spans = self._one()
            if self._exporter.export(spans) == SpanExportResult.SUCCESS:
                self.sent += 1
            else:
                self.failed += 1

    def _one(self) -> Sequence[ReadableSpan]:
        self._collect.spans = []
        agent = self._tracer.start_span(
            f"invoke_agent {AGENT}",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": AGENT,
                "gen_ai.output.messages": _OUTPUT,
            },
        )
        self._tracer.start_span(
            "chat probe", context=set_span_in_context(agent), attributes={"gen_ai.operation.name": "chat"}
        ).end()
        agent.end()
        return list(self._collect.spans)

    def finish(self) -> int:
        """Stop sending (once); the probes acknowledged."""
        if not self._halt.is_set():
            self._halt.set()
            self.join()
            self._exporter.shutdown()
        return self.sent
