"""Other tools' evaluations in decoded telemetry: ``gen_ai.evaluation.result`` events → evaluation rows.

The entry point is :func:`split`, a pure function of decoded spans and log records (it does not
care how they arrived). It finds

- **log records** whose event name is ``gen_ai.evaluation.result`` (the form the OpenTelemetry
  GenAI conventions now prefer): the record's trace and span id name the evaluated span;
- **span events** of that name (the older form): on an ordinary span, that span is the one
  evaluated; on an *evaluation span* (one carrying ``gen_ai.evaluation.name`` itself, or
  ``openinference.span.kind = EVALUATOR``) the evaluated span is the one it links to, else its
  parent. An evaluation span with the attributes and no event counts as one evaluation too.

Each becomes an :class:`~tracescorer.records.labels.EvaluationRecord` with its emitter (the
resource's ``service.name``), ``gen_ai.evaluation.name``, score value and label, explanation,
``error.type``, ``gen_ai.conversation.id``, ``gen_ai.response.id`` and every attribute as sent.
One without a trace id but with a conversation id is about the conversation.

The evaluation log records and evaluation spans are taken out of the telemetry handed on: they are
stored as evaluations, not in the span log, where a late one would make its trace be assembled and
scored again. tracescorer's own exported evaluations (scope ``tracescorer.export``, or a
``tracescorer.score.id`` attribute) are recognised and dropped, never ingested back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as genai

from tracescorer.model import LogRecord, Span, SpanEvent
from tracescorer.records.labels import EvaluationRecord, evaluation_id

EVALUATION_EVENT = "gen_ai.evaluation.result"
#: what tracescorer's own exports carry (:mod:`tracescorer.export.evaluation`)
OWN_SCOPE = "tracescorer.export"
OWN_MARK = "tracescorer.score.id"
#: evaluator versions, in the order they are looked for: the conventions keep evaluator id and
#: version as open proposals, so ours is in the project's namespace
VERSION_KEYS = ("tracescorer.evaluator.version", "gen_ai.evaluation.evaluator.version", "gen_ai.evaluator.version")
CONVERSATION_ID = "gen_ai.conversation.id"
RESPONSE_ID = "gen_ai.response.id"
ERROR_TYPE = "error.type"
_EVALUATOR_KIND = ("openinference.span.kind", "EVALUATOR")
_MAX_TEXT = 16_384


@dataclass(slots=True)
class Split:
    """The telemetry to store as before, the evaluations found, and what was left out."""

    spans: Sequence[Span]
    logs: Sequence[LogRecord]
    evaluations: list[EvaluationRecord] = field(default_factory=list)
    own: int = 0  # tracescorer's own exported evaluations, dropped
    invalid: int = 0  # evaluation events without gen_ai.evaluation.name, dropped

    def add(self, found: EvaluationRecord | None) -> None:
        if found is None:
            self.invalid += 1
        else:
            self.evaluations.append(found)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    return text[:_MAX_TEXT] if text else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _own(attrs: Mapping[str, Any], scope_name: str) -> bool:
    return scope_name == OWN_SCOPE or OWN_MARK in attrs


def _record(
    attrs: Mapping[str, Any],
    *,
    source: str,
    kind: str,
    trace_id: str | None,
    span_id: str | None,
    at_unix_nano: int,
) -> EvaluationRecord | None:
    name = _text(attrs.get(genai.GEN_AI_EVALUATION_NAME))
    if name is None:
        return None
    conversation = _text(attrs.get(CONVERSATION_ID))
    response = _text(attrs.get(RESPONSE_ID))
    trace_id = trace_id or None
    span_id = span_id if trace_id and span_id else None
    target_type = "conversation" if trace_id is None and conversation else "run"
    version = next((_text(attrs[k]) for k in VERSION_KEYS if attrs.get(k) is not None), None)
    return EvaluationRecord(
        id=evaluation_id(source, name, trace_id, span_id, conversation if trace_id is None else response),
        name=name,
        source=source,
        kind=kind,
        target_type=target_type,
        trace_id=trace_id,
        span_id=span_id,
        conversation_id=conversation,
        response_id=response,
        score=_number(attrs.get(genai.GEN_AI_EVALUATION_SCORE_VALUE)),
        label=_text(attrs.get(genai.GEN_AI_EVALUATION_SCORE_LABEL)),
        explanation=_text(attrs.get(genai.GEN_AI_EVALUATION_EXPLANATION)),
        error_type=_text(attrs.get(ERROR_TYPE)),
        evaluator_version=version,
        evaluated_at=at_unix_nano / 1e9 if at_unix_nano else None,
        attributes=dict(attrs),
    )


def _evaluation_span(span: Span) -> bool:
    return (
        genai.GEN_AI_EVALUATION_NAME in span.attributes or span.attributes.get(_EVALUATOR_KIND[0]) == _EVALUATOR_KIND[1]
    )


def _evaluated(span: Span) -> str | None:
    """The span an evaluation span is about: the span it links to in its trace, else its parent."""
    for link in span.links:
        if link.trace_id == span.trace_id and link.span_id:
            return link.span_id
    return span.parent_span_id


def _from_span(span: Span, out: Split) -> bool:
    """Add the evaluations of a span's events (and of an evaluation span's own attributes) to
    ``out``; True when the span is an evaluation span (kept out of the span log)."""
    events: list[SpanEvent] = [e for e in span.events if e.name == EVALUATION_EVENT]
    evaluation_span = _evaluation_span(span)
    if not events and not evaluation_span:
        return False
    source = span.service_name or ""
    scope = span.scope.name
    if _own(span.attributes, scope):
        out.own += max(1, len(events))
        return True
    evaluated = _evaluated(span) if evaluation_span else span.span_id
    found: list[tuple[Mapping[str, Any], str, int]] = []  # (attributes, kind, time)
    for event in events:
        merged = {**span.attributes, **event.attributes} if evaluation_span else event.attributes
        found.append((merged, "span_event", event.time_unix_nano))
    if evaluation_span and not events:
        found.append((span.attributes, "span", span.end_time_unix_nano))
    for attrs, kind, at in found:
        if _own(attrs, scope):
            out.own += 1
            continue
        out.add(_record(attrs, source=source, kind=kind, trace_id=span.trace_id, span_id=evaluated, at_unix_nano=at))
    return evaluation_span


def split(spans: Sequence[Span], logs: Sequence[LogRecord]) -> Split:
    """Evaluations out of decoded telemetry (see the module docstring). The sequences handed back
    are the ones given when nothing was taken out."""
    out = Split(spans=spans, logs=logs)
    kept_logs: list[LogRecord] | None = None
    for i, record in enumerate(logs):
        if record.name != EVALUATION_EVENT:
            if kept_logs is not None:
                kept_logs.append(record)
            continue
        if kept_logs is None:
            kept_logs = list(logs[:i])
        if _own(record.attributes, record.scope.name):
            out.own += 1
            continue
        out.add(
            _record(
                record.attributes,
                source=record.service_name or "",
                kind="log_record",
                trace_id=record.trace_id,
                span_id=record.span_id,
                at_unix_nano=record.time_unix_nano or record.observed_time_unix_nano,
            )
        )
    kept_spans: list[Span] | None = None
    for i, span in enumerate(spans):
        taken = _from_span(span, out)
        if taken and kept_spans is None:
            kept_spans = list(spans[:i])
        elif not taken and kept_spans is not None:
            kept_spans.append(span)
    if kept_logs is not None:
        out.logs = kept_logs
    if kept_spans is not None:
        out.spans = kept_spans
    return out
