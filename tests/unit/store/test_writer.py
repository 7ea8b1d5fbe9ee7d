"""The group-committing writer: OTel batch-processor lifecycle cases on a real DuckDB file."""

from __future__ import annotations

import threading
from concurrent.futures import wait

import pytest

from tracescorer.app import retention_job
from tracescorer.model import Span
from tracescorer.store.duckdb import DuckDBStore, QueueFull, StoreClosed, StoreError, open_read_only


def _span(i: int) -> Span:
    return Span(trace_id=f"{i:032x}", span_id=f"{i + 1:016x}", parent_span_id=None, name=f"s{i}", kind="internal",
                start_time_unix_nano=i, end_time_unix_nano=i + 1)


class Observer:
    def __init__(self) -> None:
        self.commits: list[tuple[int, int]] = []
        self.errors: list[BaseException] = []

    def on_commit(self, seconds, spans, logs):
        self.commits.append((spans, logs))

    def on_error(self, error):
        self.errors.append(error)


@pytest.fixture
def store(tmp_path):
    obs = Observer()
    s = DuckDBStore(tmp_path / "w.duckdb", max_queue_items=1000, max_batch_items=100, observer=obs)
    s.open()
    s.observer = obs  # type: ignore[attr-defined]
    yield s
    s.close()


def _count(store) -> int:
    return store.read(lambda c: c.execute("SELECT count(*) FROM spans").fetchone()[0])


def test_concurrent_submissions_are_group_committed(store):
    gate = threading.Event()
    store.submit(lambda con: gate.wait(10))  # hold the writer so submissions pile up
    futures = [store.submit_telemetry([_span(i)]) for i in range(50)]
    gate.set()
    wait(futures, timeout=10)
    assert all(f.exception() is None for f in futures)
    assert _count(store) == 50
    span_commits = [c for c in store.observer.commits if c[0]]
    assert len(span_commits) == 1 and span_commits[0] == (50, 0)  # one transaction for all 50


def test_batches_are_split_at_max_batch_items(store):
    gate = threading.Event()
    store.submit(lambda con: gate.wait(10))
    futures = [store.submit_telemetry([_span(i * 10 + j) for j in range(10)]) for i in range(25)]
    gate.set()
    wait(futures, timeout=10)
    sizes = [c[0] for c in store.observer.commits if c[0]]
    assert sum(sizes) == 250 and max(sizes) <= 100 and len(sizes) == 3


def test_queue_bound_refuses_then_recovers(store):
    gate = threading.Event()
    store.submit(lambda con: gate.wait(10), items=990)
    with pytest.raises(QueueFull):
        store.submit_telemetry([_span(i) for i in range(20)])
    gate.set()
    store.submit_telemetry([_span(1)]).result(10)
    assert _count(store) == 1


def test_oversized_request_is_admitted_into_an_empty_queue(tmp_path):
    s = DuckDBStore(tmp_path / "o.duckdb", max_queue_items=5)
    s.open()
    s.submit_telemetry([_span(i) for i in range(50)]).result(10)
    assert s.read(lambda c: c.execute("SELECT count(*) FROM spans").fetchone()[0]) == 50
    s.close()


def test_close_drains_queue_and_refuses_after(tmp_path):
    s = DuckDBStore(tmp_path / "d.duckdb")
    s.open()
    gate = threading.Event()
    s.submit(lambda con: gate.wait(10))
    futures = [s.submit_telemetry([_span(i)]) for i in range(30)]
    threading.Timer(0.2, gate.set).start()
    assert s.close(timeout_s=10)
    assert all(f.done() and f.exception() is None for f in futures)
    with pytest.raises(StoreClosed):
        s.submit_telemetry([_span(99)])
    con = open_read_only(tmp_path / "d.duckdb")
    assert con.execute("SELECT count(*) FROM spans").fetchone()[0] == 30
    con.close()


def test_a_failing_job_does_not_fail_its_batch_mates(store):
    gate = threading.Event()
    store.submit(lambda con: gate.wait(10))
    good = store.submit_telemetry([_span(1)])
    bad = store.submit(lambda con: con.execute("SELECT * FROM no_such_table"))
    good2 = store.submit_telemetry([_span(2)])
    gate.set()
    assert good.result(10) is None and good2.result(10) is None
    with pytest.raises(StoreError, match="no_such_table"):
        bad.result(10)
    assert _count(store) == 2 and len(store.observer.errors) == 1


def test_cancelled_job_is_skipped_and_writer_survives(store):
    gate = threading.Event()
    store.submit(lambda con: gate.wait(10))
    doomed = store.submit(lambda con: con.execute("INSERT INTO schema_info VALUES ('x', 'y')"))
    assert doomed.cancel()
    gate.set()
    store.submit_telemetry([_span(3)]).result(10)
    assert store.read(lambda c: c.execute("SELECT count(*) FROM schema_info WHERE key = 'x'").fetchone()[0]) == 0


def test_retention_deletes_by_received_at(store):
    store.submit_telemetry([_span(1), _span(2)]).result(10)
    store.submit(lambda con: con.execute("UPDATE spans SET received_at = now() - INTERVAL 40 DAY WHERE name = 's1'")).result(10)
    deleted = store.submit(retention_job(30)).result(10)
    assert deleted == {"spans": 1, "log_records": 0, "assembled_traces": 0}
    assert store.read(lambda c: c.execute("SELECT name FROM spans").fetchall()) == [("s2",)]


def test_internal_jobs_are_not_refused_when_intake_is_full(store):
    gate = threading.Event()
    store.submit(lambda con: gate.wait(10), items=995)
    with pytest.raises(QueueFull):
        store.submit_telemetry([_span(i) for i in range(20)])
    # a stage's own write (runs, scores) must not be lost to backpressure meant for clients
    job = store.submit(lambda con: con.execute("INSERT INTO schema_info VALUES ('k', 'v')"), items=50)
    gate.set()
    job.result(10)
    assert store.read(lambda c: c.execute("SELECT value FROM schema_info WHERE key = 'k'").fetchone()) == ("v",)
