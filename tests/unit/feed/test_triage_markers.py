"""Triage's markers cover every way a convention detects a trace, derived from the conventions.

Triage keeps a trace only when one of its items holds a marker
(:attr:`~tracescorer.conventions.base.Convention.markers`); a convention that detects a trace by a
key, scope, span or event name no marker matches would lose its runs in the default
``store.spans: agent``. Nothing here lists the conventions' keys again: every string constant of
the convention modules is tried as each signal a trace carries, and whatever a convention detects
must be kept by triage.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from tracescorer.conventions import generic
from tracescorer.conventions.base import TraceFacts
from tracescorer.conventions.registry import CONVENTIONS, extract_runs, markers
from tracescorer.feed.triage import Triage
from tracescorer.model import LogRecord, Resource, Scope, Span, SpanEvent
from tracescorer.receiver.encode import encode_logs, encode_traces

CONVENTIONS_DIR = Path(generic.__file__).resolve().parent
TRACE = "d" * 32
#: numbered message keys (``gen_ai.prompt.0.content``) are built from a prefix constant
_NUMBERED = (".0.role", ".0.content", ".1.content", ".0.message.role", ".0.message.content")


@cache
def _constants() -> tuple[str, ...]:
    """Every one-line string constant of the convention modules (keys, prefixes, names, values)."""
    found: set[str] = set()
    for path in sorted(CONVENTIONS_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if text and len(text) <= 80 and "\n" not in text:
                    found.add(text)
    return tuple(sorted(found))


def _span(
    *,
    name: str = "work",
    attrs: dict | None = None,
    scope: str = "app",
    events: tuple[str, ...] = (),
    span_id: str = "1",
) -> Span:
    return Span(
        trace_id=TRACE,
        span_id=span_id * 16,
        parent_span_id=None if span_id == "1" else "1" * 16,
        name=name,
        kind="internal",
        start_time_unix_nano=1,
        end_time_unix_nano=9,
        attributes=attrs or {},
        events=tuple(SpanEvent(name=e, time_unix_nano=2) for e in events),
        resource=Resource(attributes={"service.name": "svc"}),
        scope=Scope(name=scope),
    )


def _event_log(name: str, body: object = None, attrs: dict | None = None, span_id: str = "1") -> LogRecord:
    return LogRecord(
        time_unix_nano=3,
        observed_time_unix_nano=3,
        event_name=name,
        body=body,
        attributes=attrs or {},
        trace_id=TRACE,
        span_id=span_id * 16,
        resource=Resource(attributes={"service.name": "svc"}),
        scope=Scope(name="app"),
    )


def _kept(spans: list[Span], logs: list[LogRecord]) -> bool:
    """Whether triage keeps the trace when each item comes in a request of its own."""
    triage = Triage(markers())
    return any(triage.sort(encode_traces([s]), 0).kept_traces for s in spans) or any(
        triage.sort(encode_logs([r]), 0, logs=True).kept_traces for r in logs
    )


def _signals(text: str) -> Iterator[tuple[str, list[Span], list[LogRecord]]]:
    """One-item traces carrying ``text`` as each thing detection reads."""
    for key in (text, *(text.rstrip(".") + n for n in _NUMBERED)):
        yield f"key {key!r}", [_span(attrs={key: "x"})], []
    yield f"scope {text!r}", [_span(scope=text)], []
    yield f"span name {text!r}", [_span(name=text)], []
    yield f"span name {text + ' x'!r}", [_span(name=text + " x")], []
    yield f"span event {text!r}", [_span(events=(text,))], []
    yield f"log record event {text!r}", [_span()], [_event_log(text)]
    yield f"gen_ai.operation.name {text!r}", [_span(attrs={"gen_ai.operation.name": text})], []


def test_every_signal_a_convention_detects_a_trace_by_is_kept_by_triage() -> None:
    missed = []
    for text in _constants():
        for what, spans, logs in _signals(text):
            logs_by_span: dict[str, list[LogRecord]] = {}
            for rec in logs:
                logs_by_span.setdefault(rec.span_id or "", []).append(rec)
            facts = TraceFacts(spans, logs_by_span)
            detected = [c.name for c in CONVENTIONS if c.detect(facts) > 0]
            if generic.claims(facts):
                detected.append(generic.NAME)
            if detected and not _kept(spans, logs):
                missed.append(f"{what}: detected by {', '.join(detected)}")
    assert not missed, "triage skips traces these conventions detect:\n" + "\n".join(missed)


def _random_trace(rng: random.Random, words: tuple[str, ...]) -> tuple[list[Span], list[LogRecord]]:
    values = (*words, "hi", '[{"role": "user", "content": "hi"}]', '{"role": "assistant", "content": "ok"}', 3)
    spans, logs = [], []
    for i in range(rng.randint(1, 3)):
        span_id = str(i + 1)
        keys = [rng.choice(words) for _ in range(rng.randint(1, 6))]
        keys = [k.rstrip(".") + rng.choice(_NUMBERED) if rng.random() < 0.1 else k for k in keys]
        spans.append(
            _span(
                name=rng.choice(words) + rng.choice(("", " gpt-4o")),
                attrs={k: rng.choice(values) for k in keys},
                scope=rng.choice(words) if rng.random() < 0.3 else "app",
                events=(rng.choice(words),) if rng.random() < 0.2 else (),
                span_id=span_id,
            )
        )
        if rng.random() < 0.2:
            logs.append(_event_log(rng.choice(words), rng.choice(values), {rng.choice(words): "x"}, span_id))
    return spans, logs


@pytest.mark.parametrize("seed", range(4))
def test_random_traces_of_the_conventions_constants_that_give_a_run_are_kept_by_triage(seed: int) -> None:
    """Detection rules combine signals (a namespace and a key, a scope and an operation): traces
    drawn from the same constants, kept by triage whenever extraction gives them a run."""
    rng = random.Random(seed)
    words = _constants()
    with_runs, missed = 0, []
    for _ in range(1500):
        spans, logs = _random_trace(rng, words)
        runs = extract_runs(spans, logs).runs
        if not runs:
            continue
        with_runs += 1
        if not _kept(spans, logs):
            missed.append(([(s.name, s.scope.name, s.attributes) for s in spans], [r.name for r in logs]))
    assert with_runs > 100  # the draw does reach the conventions
    assert not missed, missed[:5]
