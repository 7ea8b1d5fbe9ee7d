"""Worker partitions: every item goes to exactly one worker, triage and all; a change of the worker
count neither stores an item twice nor skips one."""

from __future__ import annotations

import os

from support.captures import CASES, load_case

from tracescorer.conventions.registry import markers
from tracescorer.feed.consumers import Earlier, name, parse
from tracescorer.feed.partition import Partition, of
from tracescorer.feed.triage import Triage, cut_owned
from tracescorer.model import Resource, Scope, Span
from tracescorer.receiver.decode import decode_traces_protobuf
from tracescorer.receiver.encode import encode_traces


def _span(trace_id: str, span_id: str, *, attrs=None) -> Span:
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=None,
        name="work",
        kind="internal",
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        attributes=attrs or {},
        resource=Resource(attributes={"service.name": "svc"}),
        scope=Scope(name="app"),
    )


def _ids(payload: bytes | None) -> list[tuple[str, str]]:
    return [] if payload is None else sorted((s.trace_id, s.span_id) for s in decode_traces_protobuf(payload).spans)


def test_each_span_of_a_mixed_request_goes_to_exactly_one_of_three_workers() -> None:
    spans = [_span(os.urandom(16).hex(), f"{i:016x}") for i in range(60)]
    payload = encode_traces(spans)
    parts = [Partition(i, 3) for i in range(3)]
    got = [_ids(cut_owned(payload, p.owns)) for p in parts]
    assert sorted(x for g in got for x in g) == _ids(payload)
    assert all(got), "60 random traces leave no worker empty"
    for p, ids in zip(parts, got, strict=True):
        assert all(p.owns_hex(trace_id) for trace_id, _ in ids)
    one = Partition(0, 1)
    assert cut_owned(payload, one.owns) is payload  # everything: the request itself


def test_triage_with_a_partition_keeps_only_its_traces_agent_content() -> None:
    agent = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai"}
    traces = [os.urandom(16).hex() for _ in range(20)]
    spans = [_span(t, f"{i:016x}", attrs=agent if i % 2 else None) for i, t in enumerate(traces)]
    payload = encode_traces(spans)
    whole = Triage(markers()).sort(payload, 0)
    kept = []
    for i in range(2):
        part = Partition(i, 2)
        result = Triage(markers()).sort(payload, 0, owns=part.owns)
        ids = _ids(result.kept)
        assert all(part.owns_hex(t) for t, _ in ids)
        assert all(part.owns(t) for t in result.skipped if t)
        kept += ids
    assert sorted(kept) == _ids(whole.kept)


def test_partitions_of_every_capture_together_hold_every_span() -> None:
    for case in CASES[:5]:
        spans, _ = load_case(case)
        payload = encode_traces(spans)
        got = sorted(x for i in range(2) for x in _ids(cut_owned(payload, Partition(i, 2).owns)))
        assert got == _ids(payload), case.name


def test_consumer_names_round_trip() -> None:
    assert name(None) == "" and parse("") == Partition(0, 1)
    assert parse(name(Partition(2, 5))) == Partition(2, 5)
    assert parse("zzz") is None and parse("w1") is None


def test_a_new_worker_count_takes_only_what_no_earlier_consumer_stored() -> None:
    # two workers stored their shares up to offsets 500 and 900; now there are three
    saved = {"w0/2": (520, 500), "w1/2": (950, 900)}
    earlier = Earlier("w1/3", saved)
    assert earlier.start == 520 and earlier.through == 900
    me = Partition(1, 3)
    traces = [os.urandom(16) for _ in range(400)]
    # at 700 the first old worker had not stored its share: those traces are taken again
    owns = earlier.owner(me, 700)
    assert owns is not None
    for t in traces:
        assert owns(t) == (me.owns(t) and of(t, 2) == 0)
    # at 400 both had: nothing is taken
    owns = earlier.owner(me, 400)
    assert owns is not None and not any(owns(t) for t in traces)
    # past what any stored: only the partition decides
    assert earlier.owner(me, 901) == me.owns
    # the daemon's own feed (no workers) after workers: the same rule, every trace its own
    back = Earlier("", saved)
    owns = back.owner(None, 700)
    assert owns is not None
    assert [owns(t) for t in traces] == [of(t, 2) == 0 for t in traces]
    assert back.owner(None, 901) is None


def test_an_unchanged_worker_count_starts_from_its_own_offset() -> None:
    saved = {"w0/2": (520, 500), "w1/2": (950, 900)}
    earlier = Earlier("w0/2", saved)
    assert earlier.through == 900  # the other worker stored more, but never this one's traces
    owns = earlier.owner(Partition(0, 2), 700)
    traces = [os.urandom(16) for _ in range(100)]
    assert owns is not None and [owns(t) for t in traces] == [Partition(0, 2).owns(t) for t in traces]
