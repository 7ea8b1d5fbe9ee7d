"""The ``otlp`` sink: one evaluation span per score, inside the scored trace, that leaves it as it was.

Each span is ``evaluate {scorer_id}``, a child of the scored agent span (conversation scores:
the last run's) with a Span Link to it, carrying the ``gen_ai.evaluation.*`` attributes and a
``gen_ai.evaluation.result`` event with the same attributes, and
``openinference.span.kind=EVALUATOR`` (Phoenix and MLflow show it as an evaluator span).

It changes nothing the backend shows for the agent's trace:

- **time**: the span is zero-length at the scored span's end time, so the trace's duration is
  not stretched by the idle wait and the scoring (which can be minutes for conversations); the
  real scoring time is in ``tracescorer.score.time_unix_nano`` and its length in
  ``tracescorer.score.duration_ms``;
- **status**: always UNSET; a scorer error is ``error.type`` and ``tracescorer.score.error``,
  never span status ERROR (which backends propagate to the trace as a failed agent run);
- **resource**: ``service.name`` is the scored run's service (MLflow turns resource attributes
  into trace tags, last writer wins); the exporter identifies itself by the instrumentation
  scope ``tracescorer.export``.

The span id is derived from the score id and version: a retry sends the same span again, a
re-score sends a new one (backends keep both; the newest has the latest ``updated`` time).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from itertools import groupby

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from tracescorer.export.evaluation import (
    EVALUATION_EVENT,
    SCOPE,
    digest_id,
    evaluation_attributes,
    evaluation_span_id,
    hex_id,
    key_values,
    resource_attributes,
    scored_time_unix_nano,
)
from tracescorer.export.otlp_transport import OtlpRequestSink, OtlpTarget
from tracescorer.records.deliveries import DueScore

log = logging.getLogger(__name__)

__all__ = ["OtlpSpanSink", "evaluation_span", "span_request"]

_SAMPLED = 0x01


def evaluation_span(score: DueScore, *, event: bool = True) -> Span:
    """The evaluation span for one score version (identical for the same version); ``event``: with
    the ``gen_ai.evaluation.result`` span event (the form the conventions deprecate in favour of a
    log record, kept for backends that read it)."""
    trace_id = hex_id(score.trace_id, 32)
    parent = hex_id(score.span_id, 16) if trace_id is not None else None
    if trace_id is None:
        # no scored trace to join (should not happen for stored runs): a trace of its own,
        # stable per score so retries and re-scores land together
        trace_id = digest_id(f"tracescorer.trace\0{score.id}", 16)
    attrs = evaluation_attributes(score)
    at = scored_time_unix_nano(score)
    span = Span(
        trace_id=trace_id,
        span_id=evaluation_span_id(score),
        name=f"evaluate {score.scorer_id}",
        kind=Span.SpanKind.SPAN_KIND_INTERNAL,
        start_time_unix_nano=at,
        end_time_unix_nano=at,
        attributes=key_values({**attrs, "openinference.span.kind": "EVALUATOR"}),
        events=[Span.Event(time_unix_nano=at, name=EVALUATION_EVENT, attributes=key_values(attrs))] if event else [],
        status=Status(code=Status.StatusCode.STATUS_CODE_UNSET),
        flags=_SAMPLED,
    )
    if parent is not None:
        span.parent_span_id = parent
        span.links.append(Span.Link(trace_id=trace_id, span_id=parent, flags=_SAMPLED))
    return span


def span_request(batch: Sequence[DueScore], *, events: bool = True) -> ExportTraceServiceRequest:
    """One request, one ResourceSpans per scored service."""
    request = ExportTraceServiceRequest()
    keyed = sorted(batch, key=lambda s: resource_attributes(s)["service.name"])
    for _, group in groupby(keyed, key=lambda s: resource_attributes(s)["service.name"]):
        scores = list(group)
        spans = []
        for score in scores:
            try:
                spans.append(evaluation_span(score, event=events))
            except Exception:  # one malformed row must not hold back the batch
                log.exception("cannot build an evaluation span for score %s", score.id)
        request.resource_spans.append(
            ResourceSpans(
                resource=Resource(attributes=key_values(resource_attributes(scores[0]))),
                scope_spans=[ScopeSpans(scope=SCOPE, spans=spans)],
            )
        )
    return request


class OtlpSpanSink(OtlpRequestSink):
    """Evaluation spans over OTLP (gRPC or HTTP/protobuf); one request per batch."""

    kind = "otlp"

    def __init__(self, target: OtlpTarget, *, span_events: bool = True) -> None:
        super().__init__(target)
        self.span_events = span_events

    def request(self, batch: Sequence[DueScore]) -> ExportTraceServiceRequest:
        return span_request(batch, events=self.span_events)
