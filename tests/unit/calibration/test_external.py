"""Other tools' evaluations out of decoded telemetry: which records and spans are evaluations,
which are tracescorer's own, what is handed on to the span log."""

from __future__ import annotations

from tracescorer.calibration.external import split
from tracescorer.model import LogRecord, Resource, Scope, Span, SpanEvent, SpanLink

TRACE, AGENT, CHILD = "a" * 32, "b" * 16, "c" * 16


def _log(attributes: dict, *, event: str = "gen_ai.evaluation.result", scope: str = "evals", **kw: object) -> LogRecord:
    return LogRecord(
        time_unix_nano=2_000_000_000,
        observed_time_unix_nano=3_000_000_000,
        event_name=event,
        attributes=attributes,
        trace_id=kw.get("trace_id", TRACE),  # type: ignore[arg-type]
        span_id=kw.get("span_id", AGENT),  # type: ignore[arg-type]
        resource=Resource(attributes={"service.name": "evaluator"}),
        scope=Scope(name=scope),
    )


def _span(span_id: str, *, parent: str | None = None, events=(), attributes=None, links=(), scope: str = "app") -> Span:
    return Span(
        trace_id=TRACE,
        span_id=span_id,
        parent_span_id=parent,
        name=f"span {span_id[:2]}",
        kind="internal",
        start_time_unix_nano=1,
        end_time_unix_nano=5_000_000_000,
        attributes=attributes or {},
        events=tuple(events),
        links=tuple(links),
        scope=Scope(name=scope),
    )


def _event(attributes: dict) -> SpanEvent:
    return SpanEvent(name="gen_ai.evaluation.result", time_unix_nano=4_000_000_000, attributes=attributes)


def test_telemetry_without_evaluations_is_handed_on_as_it_was():
    spans, logs = [_span(AGENT)], [_log({}, event="gen_ai.choice")]
    out = split(spans, logs)
    assert out.spans is spans and out.logs is logs and out.evaluations == []


def test_evaluation_log_records_become_rows_and_leave_the_telemetry():
    logs = [
        _log(
            {"gen_ai.evaluation.name": "Relevance", "gen_ai.evaluation.score.value": "0.5", "gen_ai.response.id": "r1"}
        ),
        _log({}, event="gen_ai.choice"),
        _log({"gen_ai.evaluation.score.value": 1}),  # no name
        _log({"gen_ai.evaluation.name": "x", "tracescorer.score.id": "s1"}),  # ours, by its attribute
        _log({"gen_ai.evaluation.name": "x"}, scope="tracescorer.export"),  # ours, by its scope
        _log({"gen_ai.evaluation.name": "Goal", "gen_ai.conversation.id": "conv-1"}, trace_id=None, span_id=None),
    ]
    out = split([], logs)
    assert [r.event_name for r in out.logs] == ["gen_ai.choice"]
    assert (out.own, out.invalid) == (2, 1)
    relevance, goal = out.evaluations
    assert (relevance.name, relevance.score, relevance.source, relevance.kind) == (
        "Relevance",
        0.5,
        "evaluator",
        "log_record",
    )
    assert (relevance.trace_id, relevance.span_id, relevance.response_id, relevance.evaluated_at) == (
        TRACE,
        AGENT,
        "r1",
        2.0,
    )
    assert (goal.target_type, goal.conversation_id, goal.trace_id) == ("conversation", "conv-1", None)
    assert goal.id != relevance.id


def test_span_events_name_their_span_and_evaluation_spans_the_span_they_evaluate():
    ordinary = _span(
        CHILD, parent=AGENT, events=[_event({"gen_ai.evaluation.name": "Tone", "gen_ai.evaluation.score.label": "ok"})]
    )
    evaluator = _span(
        "d" * 16,
        parent=CHILD,
        attributes={"openinference.span.kind": "EVALUATOR"},
        links=[SpanLink(trace_id=TRACE, span_id=AGENT)],
        events=[_event({"gen_ai.evaluation.name": "Correct", "gen_ai.evaluation.score.value": 1.0})],
    )
    bare = _span(
        "e" * 16, parent=AGENT, attributes={"gen_ai.evaluation.name": "Safety", "gen_ai.evaluation.score.value": 0.9}
    )
    ours = _span(
        "f" * 16,
        parent=AGENT,
        attributes={"gen_ai.evaluation.name": "j"},
        events=[_event({})],
        scope="tracescorer.export",
    )
    out = split([_span(AGENT), ordinary, evaluator, bare, ours], [])
    assert [s.span_id for s in out.spans] == [AGENT, CHILD]  # the evaluation spans are not stored as spans
    by = {e.name: e for e in out.evaluations}
    assert (by["Tone"].span_id, by["Tone"].kind, by["Tone"].label) == (CHILD, "span_event", "ok")
    assert (by["Correct"].span_id, by["Correct"].kind) == (AGENT, "span_event")  # its link
    assert (by["Safety"].span_id, by["Safety"].kind, by["Safety"].score) == (AGENT, "span", 0.9)  # its parent
    assert out.own == 1 and set(by) == {"Tone", "Correct", "Safety"}
