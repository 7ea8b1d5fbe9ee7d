"""Triage on real captures and on a Collector-like feed: what it skips never costs a run."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.captures import CASES, load_case

from tracescorer.conventions import extract_runs
from tracescorer.conventions.registry import CONVENTIONS, markers
from tracescorer.feed.triage import Triage, pick
from tracescorer.model import LogRecord, Resource, Scope, Span
from tracescorer.receiver.decode import decode_logs_protobuf, decode_traces_protobuf
from tracescorer.receiver.encode import encode_logs, encode_traces

TRACE_A, TRACE_B = "a" * 32, "b" * 32


def _span(trace_id: str, span_id: str, *, parent: str | None = None, attrs=None, scope="app", service="svc") -> Span:
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name="work",
        kind="internal",
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        attributes=attrs or {},
        resource=Resource(attributes={"service.name": service}),
        scope=Scope(name=scope),
    )


def _replay(requests: list[tuple[bytes, bool]]) -> tuple[list[Span], list[LogRecord], int]:
    """What the feed hands on: each request triaged in order (offset = its index), kept items
    decoded, earlier skipped items of traces found to hold agent content read back."""
    triage = Triage(markers())
    spans: list[Span] = []
    logs: list[LogRecord] = []
    skipped = 0
    for offset, (payload, is_logs) in enumerate(requests):
        result = triage.sort(payload, offset, logs=is_logs)
        skipped += sum(s.items for s in result.skipped.values())
        if result.kept is None:
            continue
        got = decode_logs_protobuf(result.kept).records if is_logs else decode_traces_protobuf(result.kept).spans
        (logs if is_logs else spans).extend(got)  # type: ignore[arg-type]
        trace_ids = {bytes.fromhex(item.trace_id) for item in got if item.trace_id}
        for earlier, traces in triage.late(trace_ids).items():
            old, old_is_logs = requests[earlier]
            picked = pick(old, traces, logs=old_is_logs)
            assert picked is not None
            if old_is_logs:
                back = decode_logs_protobuf(picked).records
                logs.extend(back)
            else:
                back_spans = decode_traces_protobuf(picked).spans
                spans.extend(back_spans)
            skipped -= len(back if old_is_logs else back_spans)
    return spans, logs, skipped


def _runs(spans: list[Span], logs: list[LogRecord]) -> list[dict]:
    return sorted((r.to_dict() for r in extract_runs(spans, logs).runs), key=lambda r: r["run_id"])


def test_every_convention_has_markers():
    assert all(c.markers for c in CONVENTIONS), [c.name for c in CONVENTIONS if not c.markers]


@pytest.mark.parametrize("order", ["as_sent", "reversed"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_capture_delivered_a_span_at_a_time_gives_the_same_runs_after_triage(case: Path, order: str) -> None:
    spans, logs = load_case(case)
    requests = [(encode_traces([s]), False) for s in spans] + [(encode_logs([r]), True) for r in logs]
    if order == "reversed":
        requests.reverse()  # plain parents (an HTTP root) before the agent spans under them
    kept_spans, kept_logs, skipped = _replay(requests)
    want = _runs(spans, logs)
    assert want and _runs(kept_spans, kept_logs) == want
    # every span of a trace with a run is kept; what is skipped belongs to traces without one
    run_traces = {r["trace_id"] for r in want}
    assert {s.span_id for s in kept_spans if s.trace_id in run_traces} == {
        s.span_id for s in spans if s.trace_id in run_traces
    }
    assert skipped == len(spans) + len(logs) - len(kept_spans) - len(kept_logs)


def test_plain_groups_are_skipped_without_a_decode_and_agent_traces_keep_their_plain_spans():
    genai = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    http = {"http.request.method": "GET", "http.route": "/x", "url.path": "/x", "input_size": 3}
    request = encode_traces(
        [
            _span(TRACE_A, "1" * 16, attrs=http, scope="opentelemetry.instrumentation.fastapi", service="api"),
            _span(TRACE_A, "2" * 16, parent="1" * 16, attrs=genai, scope="openai", service="api"),
            _span(TRACE_B, "3" * 16, attrs=http, scope="opentelemetry.instrumentation.fastapi", service="shop"),
            _span(TRACE_B, "4" * 16, parent="3" * 16, attrs={"db.system.name": "postgresql"}, service="shop"),
        ]
    )
    triage = Triage(markers())
    result = triage.sort(request, 0)
    assert result.kept is not None and not result.whole
    kept = decode_traces_protobuf(result.kept).spans
    assert sorted(s.span_id for s in kept) == ["1" * 16, "2" * 16]  # A's HTTP span rides with its model call
    assert kept[0].resource.attributes["service.name"] == "api"
    (skipped,) = result.skipped.items()
    assert skipped[0] == bytes.fromhex(TRACE_B) and (skipped[1].items, skipped[1].service) == (2, "shop")
    # a later plain span of the known agent trace is kept at once; of the plain trace, skipped
    later = triage.sort(encode_traces([_span(TRACE_A, "5" * 16), _span(TRACE_B, "6" * 16)]), 1)
    assert [s.span_id for s in decode_traces_protobuf(later.kept).spans] == ["5" * 16]
    assert triage.late([bytes.fromhex(TRACE_B)]) == {0: {bytes.fromhex(TRACE_B)}, 1: {bytes.fromhex(TRACE_B)}}
    assert triage.late([bytes.fromhex(TRACE_B)]) == {}  # read back once


def test_a_request_of_agent_groups_is_kept_as_it_came_and_one_of_plain_groups_not_at_all():
    agent = encode_traces([_span(TRACE_A, "1" * 16, attrs={"openinference.span.kind": "LLM"})])
    result = Triage(markers()).sort(agent, 0)
    assert result.whole and result.kept is agent and not result.skipped
    plain = encode_traces([_span(TRACE_B, "2" * 16, attrs={"http.request.method": "GET", "messaging.system": "kafka"})])
    result = Triage(markers()).sort(plain, 0)
    assert result.kept is None and result.skipped[bytes.fromhex(TRACE_B)].items == 1


def test_generic_keys_match_whole_keys_only():
    triage = Triage(markers())
    near = encode_traces([_span(TRACE_B, "2" * 16, attrs={"http.request.body.size": 5, "user_input": "x"})])
    assert triage.sort(near, 0).kept is None
    exact = encode_traces([_span(TRACE_A, "1" * 16, attrs={"input": "hi", "model": "m"})])
    assert triage.sort(exact, 1).whole


def test_what_is_remembered_is_bounded_and_expires():
    now = [0.0]
    triage = Triage(markers(), window_s=10, max_traces=3, clock=lambda: now[0])
    for i in range(5):
        triage.sort(encode_traces([_span(f"{i + 1:032x}", "1" * 16)]), i)
    triage.expire()  # each request's sort expires first: at most max_traces + one request's
    assert triage.oldest_skipped_offset() == 2  # the three newest are remembered
    now[0] = 11
    triage.expire()
    assert triage.oldest_skipped_offset() is None
    assert triage.late([bytes.fromhex(f"{5:032x}")]) == {}


def test_a_known_agent_trace_keeps_its_later_plain_items_for_the_agent_window():
    """Skipped items are remembered for ``window_s``; a trace with agent content keeps later plain
    items (its HTTP root, ending last) for ``agent_window_s``."""
    now = [0.0]
    triage = Triage(markers(), window_s=10, agent_window_s=100, clock=lambda: now[0])
    triage.sort(encode_traces([_span(TRACE_A, "1" * 16, attrs={"gen_ai.operation.name": "chat"})]), 0)
    triage.sort(encode_traces([_span(TRACE_B, "2" * 16)]), 1)
    now[0] = 50
    later = triage.sort(encode_traces([_span(TRACE_A, "3" * 16), _span(TRACE_B, "4" * 16)]), 2)
    assert later.kept is not None
    assert [s.span_id for s in decode_traces_protobuf(later.kept).spans] == ["3" * 16]
    assert triage.late([bytes.fromhex(TRACE_B)]) == {2: {bytes.fromhex(TRACE_B)}}  # offset 1 forgotten
    now[0] = 101
    assert triage.sort(encode_traces([_span(TRACE_A, "5" * 16)]), 3).kept is None


def test_logs_of_an_agent_trace_are_kept_and_other_logs_skipped():
    triage = Triage(markers())
    triage.sort(encode_traces([_span(TRACE_A, "1" * 16, attrs={"gen_ai.operation.name": "chat"})]), 0)
    records = [
        LogRecord(
            time_unix_nano=1,
            observed_time_unix_nano=1,
            trace_id=TRACE_A,
            span_id="1" * 16,
            body="plain",
            resource=Resource(),
            scope=Scope(),
        ),
        LogRecord(
            time_unix_nano=1,
            observed_time_unix_nano=1,
            trace_id=TRACE_B,
            span_id="2" * 16,
            body="plain",
            resource=Resource(),
            scope=Scope(),
        ),
        LogRecord(time_unix_nano=1, observed_time_unix_nano=1, body="no trace", resource=Resource(), scope=Scope()),
    ]
    result = triage.sort(encode_logs(records), 1, logs=True)
    assert [r.trace_id for r in decode_logs_protobuf(result.kept).records] == [TRACE_A]
    assert {k: v.items for k, v in result.skipped.items()} == {bytes.fromhex(TRACE_B): 1, b"": 1}
