"""TraceBuffer: completion on idle/max-wait with an injected clock, bounded memory, late spans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracescorer.assembly import TraceBuffer, is_root
from tracescorer.conventions import extract_runs
from tracescorer.model import LogRecord, Span
from tracescorer.receiver.decode import decode_logs_protobuf, decode_traces_protobuf

CAPTURES = Path(__file__).resolve().parents[2] / "data" / "captures"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def span(trace: str, sid: str, parent: str | None = None, flags: int = 0) -> Span:
    return Span(
        trace_id=trace,
        span_id=sid,
        parent_span_id=parent,
        name="s",
        kind="internal",
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        flags=flags,
    )


T1, T2, T3 = "1" * 32, "2" * 32, "3" * 32


def test_complete_after_root_and_idle() -> None:
    clock = Clock()
    buf = TraceBuffer(idle_s=5, max_wait_s=300, clock=clock)
    buf.add_spans([span(T1, "b" * 16, parent="a" * 16)])  # child before its parent
    clock.t += 10
    assert buf.pop_complete() == []  # no root yet: not complete however quiet
    buf.add_spans([span(T1, "a" * 16)])
    clock.t += 4.9
    assert buf.pop_complete() == []
    clock.t += 0.2
    (done,) = buf.pop_complete()
    assert (done.trace_id, done.reason, done.incomplete, done.late) == (T1, "complete", False, False)
    assert {s.span_id for s in done.spans} == {"a" * 16, "b" * 16}
    assert buf.stats.traces_complete == 1 and len(buf) == 0


def test_max_wait_without_root_is_incomplete() -> None:
    clock = Clock()
    buf = TraceBuffer(idle_s=5, max_wait_s=60, clock=clock)
    buf.add_spans([span(T1, "b" * 16, parent="a" * 16)])
    for _ in range(12):  # keeps trickling in: never idle
        clock.t += 4
        buf.add_spans([span(T1, f"{int(clock.t):016x}", parent="a" * 16)])
        buf.pop_complete()
    clock.t += 20
    (done,) = buf.pop_complete()
    assert (done.reason, done.incomplete) == ("max_wait", True)
    assert buf.stats.traces_max_wait == 1


def test_a_replayed_trace_is_complete_once_idle_without_its_root_after_the_replay() -> None:
    # acknowledged before a crash, read back from the segment log: its root may never come (the
    # client's exporter died with the daemon), so it does not wait for max_wait_s; but while the
    # replay goes on its root may be further on in the log
    clock = Clock()
    buf = TraceBuffer(idle_s=5, max_wait_s=300, clock=clock)
    buf.add_spans([span(T1, "b" * 16, parent="a" * 16)], replayed=True)
    buf.add_spans([span(T2, "c" * 16, parent="d" * 16)])  # live: waits for its root
    clock.t += 5.1
    assert buf.replaying and buf.pop_complete() == []
    buf.replaying = False  # the feed passed the end of the replay
    (done,) = buf.pop_complete()
    assert (done.trace_id, done.reason) == (T1, "recovered")
    assert buf.tracking(T2)


def test_remote_parent_counts_as_root() -> None:
    assert is_root(span(T1, "a" * 16, parent="f" * 16, flags=0x300))
    assert not is_root(span(T1, "a" * 16, parent="f" * 16, flags=0x100))
    assert is_root(span(T1, "a" * 16))


def test_duplicates_kept_once_and_logs_join_their_trace() -> None:
    clock = Clock()
    buf = TraceBuffer(idle_s=1, clock=clock)
    root = span(T1, "a" * 16)
    buf.add_spans([root, root])
    buf.add_logs(
        [
            LogRecord(time_unix_nano=0, observed_time_unix_nano=0, trace_id=T1, span_id="a" * 16),
            LogRecord(time_unix_nano=0, observed_time_unix_nano=0),  # no trace id: counted only
        ]
    )
    clock.t += 2
    (done,) = buf.pop_complete()
    assert len(done.spans) == 1 and len(done.logs) == 1
    assert (buf.stats.duplicate_spans, buf.stats.logs_without_trace) == (1, 1)


def test_overflow_emits_oldest_incomplete_never_drops() -> None:
    clock = Clock()
    buf = TraceBuffer(idle_s=5, max_traces=2, max_spans=100, clock=clock)
    buf.add_spans([span(T1, "a" * 16)])
    clock.t += 1
    buf.add_spans([span(T2, "b" * 16)])
    assert buf.full  # the daemon refuses more telemetry from here on
    clock.t += 1
    buf.add_spans([span(T3, "c" * 16)])  # taken anyway (in flight): the oldest (T1) goes out now
    (out,) = buf.pop_complete()
    assert (out.trace_id, out.reason, out.incomplete) == (T1, "overflow", True)
    assert buf.stats.traces_overflow == 1 and len(buf) == 2


def test_span_budget_spills_the_oldest_traces_to_the_span_log() -> None:
    clock = Clock()
    buf = TraceBuffer(idle_s=5, max_traces=10, max_spans=3, clock=clock)
    buf.add_spans([span(T1, "a" * 16)], received=(500.0, 500.0))
    buf.add_spans([span(T2, f"{i:016x}", parent="a" * 16) for i in range(1, 4)])
    assert buf.stats.items_buffered <= 3 and buf.stats.traces_spilled == 1 and len(buf) == 2
    buf.add_spans([span(T1, "d" * 16, parent="a" * 16)], received=(501.0, 502.0))  # spilled: not kept in memory
    assert buf.stats.items_buffered <= 3
    clock.t += 6
    done = {t.trace_id: t for t in buf.pop_complete()}
    spilled = done[T1]
    # the root came, so it completes; its items are read back from the span log
    assert (spilled.reason, spilled.spilled, spilled.spans, spilled.from_store) == ("complete", True, (), True)
    assert spilled.received == (500.0, 502.0)  # the read back covers exactly its commits
    assert T2 not in done  # no root: waits for max_wait


def test_pending_traces_from_the_span_log_complete_at_once_oldest_first() -> None:
    clock = Clock()
    buf = TraceBuffer(idle_s=5, clock=clock)
    buf.add_spans([span(T3, "c" * 16)], received=(1000.0, 1000.0))  # live traffic, just arrived
    assert buf.add_pending([(T1, 900.0, 950.0, False), (T2, 960.0, 990.0, True)]) == 2
    assert buf.add_pending([(T1, 900.0, 950.0, False)]) == 0  # already tracked
    out = buf.pop_complete()
    assert [(t.trace_id, t.reason, t.late, t.spilled, t.incomplete) for t in out] == [
        (T1, "recovered", False, True, False),
        (T2, "recovered", True, True, False),
    ]
    assert buf.oldest_received() == 1000.0 and buf.tracking(T3) and not buf.tracking(T1)


def test_a_trace_in_memory_listed_by_recovery_is_read_back_whole() -> None:
    # after a restart, spans of a trace arrive live while the span log holds earlier ones (stored
    # before the stop, never assembled): recovery lists it, and it is taken to be read whole
    clock = Clock()
    buf = TraceBuffer(idle_s=5, clock=clock)
    buf.add_spans([span(T1, "a" * 16)], received=(1000.0, 1000.0))
    assert buf.add_pending([(T1, 900.0, 950.0, False)]) == 0
    clock.t += 6
    (taken,) = buf.pop_complete()
    assert taken.late and taken.from_store


def test_late_spans_start_a_new_entry_marked_late() -> None:
    clock = Clock()
    buf = TraceBuffer(idle_s=5, clock=clock)
    buf.add_spans([span(T1, "a" * 16)])
    clock.t += 6
    (first,) = buf.pop_complete()
    assert not first.late
    buf.add_spans([span(T1, "b" * 16, parent="a" * 16)])  # arrives after assembly
    clock.t += 6
    (again,) = buf.pop_complete()
    assert again.late and not again.incomplete and [s.span_id for s in again.spans] == ["b" * 16]
    assert buf.stats.traces_late == 1


def test_pop_all_drains_everything_for_shutdown() -> None:
    buf = TraceBuffer(clock=Clock())
    buf.add_spans([span(T1, "a" * 16), span(T2, "b" * 16, parent="c" * 16)])
    out = buf.pop_all()
    assert [(t.trace_id, t.reason, t.incomplete) for t in out] == [(T1, "shutdown", False), (T2, "shutdown", True)]
    assert len(buf) == 0 and buf.stats.items_buffered == 0


def test_bad_settings_rejected() -> None:
    with pytest.raises(ValueError):
        TraceBuffer(max_traces=0)


@pytest.mark.parametrize("case", ["py-openai-v2-legacy-tools", "py-pydantic-ai-multiturn-tools"])
def test_split_out_of_order_delivery_then_upsert_by_run_id(case: str) -> None:
    """A capture sent one span per request, reversed, logs late: same runs, same ids after
    re-extracting the stored spans (what the daemon does for a late entry)."""
    spans = [
        s
        for f in sorted((CAPTURES / case / "requests").glob("*.pb"))
        for s in decode_traces_protobuf(f.read_bytes()).spans
    ]
    logs = (
        [
            r
            for f in sorted((CAPTURES / case / "logs").glob("*.pb"))
            for r in decode_logs_protobuf(f.read_bytes()).records
        ]
        if (CAPTURES / case / "logs").is_dir()
        else []
    )
    expected = json.loads((CAPTURES / case / "expected.json").read_text())
    clock = Clock()
    buf = TraceBuffer(idle_s=5, clock=clock)
    stored: list[Span] = []
    runs = {}
    for s in reversed(spans):
        buf.add_spans([s])
        stored.append(s)
        clock.t += 0.5
        assert buf.pop_complete() == []  # never idle for 5 s while spans keep coming
    clock.t += 6
    for t in buf.pop_complete():
        for r in extract_runs([s for s in stored if s.trace_id == t.trace_id]).runs:
            runs[r.run_id] = r
    if logs:  # logs after the trace was assembled: a late entry, re-extracted and upserted
        buf.add_logs(logs)
        clock.t += 6
        (late,) = buf.pop_complete()
        assert late.late
        for r in extract_runs([s for s in stored if s.trace_id == late.trace_id], logs).runs:
            runs[r.run_id] = r
    assert len(runs) == len(expected["runs"])
    ordered = sorted(runs.values(), key=lambda r: r.started_at)
    assert [r.output[-1].content for r in ordered] == [w["output_text"] for w in expected["runs"]]


def test_offsets_tracked_handed_out_and_inherited_by_late_items() -> None:
    """With ``track_offsets`` each trace carries the log records its items came in; the oldest
    record still needed is what the feed keeps the segment log from; late items of an assembled
    trace start from the records it was assembled from (it is read back whole)."""
    clock = Clock()
    buf = TraceBuffer(idle_s=5, max_wait_s=300, clock=clock)
    assert buf.oldest_offset() is None
    buf.add_spans([span(T1, "a" * 16), span(T2, "c" * 16, parent="x" * 16)], offsets=[40, 40])
    buf.add_spans([span(T1, "b" * 16, parent="a" * 16)], offsets=[10])
    buf.add_logs([LogRecord(time_unix_nano=1, observed_time_unix_nano=1, trace_id=T1)], offsets=[70])
    assert buf.oldest_offset() == 10
    clock.t += 6
    (done,) = buf.pop_complete()  # T2 has no root: it stays
    assert (done.trace_id, done.offsets) == (T1, (10, 40, 70))
    assert buf.oldest_offset() == 40  # T2's record: T1's are no longer needed
    buf.add_spans([span(T1, "d" * 16, parent="a" * 16)], offsets=[90])
    assert buf.oldest_offset() == 10  # the late item's trace is read back from where it was assembled
    clock.t += 6
    (late,) = buf.pop_complete()
    assert (late.trace_id, late.late, late.offsets) == (T1, True, (10, 40, 70, 90))


def test_offsets_of_pending_traces() -> None:
    clock = Clock()
    buf = TraceBuffer(idle_s=5, max_wait_s=300, clock=clock)
    assert buf.add_pending([(T3, 1.0, 2.0, False)], offsets={T3: [55, 20]}) == 1
    assert buf.oldest_offset() == 20
    (done,) = buf.pop_complete()
    assert (done.trace_id, done.recovered, done.offsets, done.spilled) == (T3, True, (20, 55), True)
