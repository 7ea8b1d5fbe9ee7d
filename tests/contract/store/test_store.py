"""The DuckDB store through its protocol: the store process, group commit, bounds, isolation,
lifecycle (OTel batch-processor cases), every domain method, on a real DuckDB file."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import os
import signal
import time

import pytest
from support import store_ops
from support.daemon import wait_for_async
from support.db import fetch, scalar
from support.gate import WriterGate
from support.records import assembly_record, numbered_run

from tracescorer.config import Settings
from tracescorer.model import AgentRun, LogRecord, Span
from tracescorer.records.deliveries import Claim, DeliveryOutcome
from tracescorer.records.scores import AssemblyRecord, DecisionRecord, ScoreRecord
from tracescorer.store.api import AssembledBefore, QueueFull, ReadOnlyViolation, StoreClosed, StoreError
from tracescorer.store.duckdb import DuckDBStore, open_read_only
from tracescorer.store.duckdb.keys import ASSEMBLY_KEEP
from tracescorer.store.duckdb.layout import SPAN_LOGS
from tracescorer.store.factory import build_span_log


def _span(i: int, trace: int | None = None, **kw: object) -> Span:
    fields: dict[str, object] = {
        "trace_id": f"{trace if trace is not None else i:032x}",
        "span_id": f"{i + 1:016x}",
        "parent_span_id": None,
        "name": f"s{i}",
        "kind": "internal",
        "start_time_unix_nano": i,
        "end_time_unix_nano": i + 1,
    }
    fields.update(kw)
    return Span(**fields)  # type: ignore[arg-type]


class Observer:
    def __init__(self) -> None:
        self.commits: list[tuple[int, int]] = []
        self.errors: list[BaseException] = []

    def on_commit(self, seconds: float, spans: int, logs: int) -> None:
        self.commits.append((spans, logs))

    def on_checkpoint(self, database: str, seconds: float) -> None:
        pass

    def on_error(self, error: BaseException) -> None:
        self.errors.append(error)


@pytest.fixture
async def store(tmp_path):
    obs = Observer()
    s = DuckDBStore(tmp_path / "w.duckdb", max_queue_items=1000, max_batch_items=100, observer=obs)
    await s.start()
    s.observer = obs  # type: ignore[attr-defined]
    yield s
    await s.stop()


async def _count(store: DuckDBStore, table: str = "spans") -> int:
    return int(await scalar(store, f"SELECT count(*) FROM {table}"))


async def _queued(store: DuckDBStore) -> None:
    # requests are handled in the order sent: once this read is answered, all sent before are queued
    await store.read(store_ops.noop)


async def test_concurrent_appends_are_group_committed(store, tmp_path):
    async with WriterGate(store, tmp_path):
        appends = [asyncio.create_task(store.append([_span(i)])) for i in range(50)]
        await asyncio.sleep(0)
        await _queued(store)
    outcomes = await asyncio.gather(*appends)
    assert all(o.stored == 1 and o.rejected == 0 for o in outcomes)
    assert await _count(store) == 50
    span_commits = [c for c in store.observer.commits if c[0]]
    assert span_commits == [(50, 0)]  # one transaction for all 50


async def test_batches_are_split_at_max_batch_items(store, tmp_path):
    async with WriterGate(store, tmp_path):
        appends = [asyncio.create_task(store.append([_span(i * 10 + j) for j in range(10)])) for i in range(25)]
        await asyncio.sleep(0)
        await _queued(store)
    await asyncio.gather(*appends)
    sizes = [c[0] for c in store.observer.commits if c[0]]
    assert sizes == [100, 100, 50]


async def test_queue_bound_refuses_then_recovers(store, tmp_path):
    async with WriterGate(store, tmp_path):
        first = asyncio.create_task(store.append([_span(i) for i in range(990)]))
        await asyncio.sleep(0)
        assert store.pending_items == 990
        with pytest.raises(QueueFull):
            await store.append([_span(1000 + i) for i in range(20)])
        # a stage's own write (runs, scores) is never refused by the bound meant for clients
        stage_write = asyncio.create_task(
            store.write(store_ops.execute, "INSERT INTO schema_info VALUES ('k', 'v')", [])
        )
        await asyncio.sleep(0)
    await first
    await stage_write
    assert (await store.append([_span(2000)])).stored == 1
    assert await _count(store) == 991 and store.pending_items == 0
    assert await fetch(store, "SELECT value FROM schema_info WHERE key = 'k'") == [("v",)]


async def test_oversized_request_is_admitted_into_an_empty_queue(tmp_path):
    s = DuckDBStore(tmp_path / "o.duckdb", max_queue_items=5)
    await s.start()
    try:
        assert (await s.append([_span(i) for i in range(50)])).stored == 50
        assert await _count(s) == 50
    finally:
        await s.stop()


async def test_close_drains_queue_and_refuses_after(tmp_path):
    s = DuckDBStore(tmp_path / "d.duckdb")
    await s.start()
    gate = WriterGate(s, tmp_path)
    await gate.__aenter__()
    appends = [asyncio.create_task(s.append([_span(i)])) for i in range(30)]
    await asyncio.sleep(0)
    await _queued(s)
    closing = asyncio.create_task(s.stop(time.monotonic() + 20))
    await asyncio.sleep(0.2)
    gate.open()
    assert await closing
    assert all(t.result().stored == 1 for t in appends)
    with pytest.raises(StoreClosed):
        await s.append([_span(99)])
    con = open_read_only(tmp_path / "d.duckdb")
    try:
        assert con.execute("SELECT count(*) FROM spans").fetchone()[0] == 30
    finally:
        con.close()


async def test_a_failing_job_does_not_fail_its_batch_mates(store, tmp_path):
    async with WriterGate(store, tmp_path):
        good = asyncio.create_task(store.append([_span(1)]))
        bad = asyncio.create_task(store.write(store_ops.execute, "SELECT * FROM no_such_table", []))
        good2 = asyncio.create_task(store.append([_span(2)]))
        await asyncio.sleep(0)
        await _queued(store)
    assert (await good).stored == 1 and (await good2).stored == 1
    with pytest.raises(StoreError, match="no_such_table"):
        await bad
    assert await _count(store) == 2


async def test_values_the_database_cannot_hold_are_rejected_one_by_one(store):
    spans = [_span(1), _span(2, flags=-1), _span(3), _span(4, start_time_unix_nano=2**64)]
    outcome = await store.append(spans)
    assert (outcome.stored, outcome.rejected) == (2, 2)
    assert "could not be stored" in outcome.message
    assert sorted(r[0] for r in await fetch(store, "SELECT name FROM spans")) == ["s1", "s3"]
    assert store.write_failure is None  # data errors are the client's, not the database's


async def test_values_json_cannot_carry_are_rejected_before_the_store(store):
    outcome = await store.append([_span(1), _span(2, attributes={"x": "\ud800"})])
    assert (outcome.stored, outcome.rejected) == (1, 1) and "surrogate" in outcome.message


async def test_prune_deletes_by_received_at(store):
    await store.append([_span(1), _span(2)])
    for catalog in SPAN_LOGS:  # s1 is in one of them
        await store.write(
            store_ops.execute, f"UPDATE {catalog}.spans SET received_at = now() - INTERVAL 40 DAY WHERE name = 's1'", []
        )
    deleted = await store.prune_span_log(dt.datetime.now(dt.UTC) - dt.timedelta(days=30))
    assert deleted == {"spans": 1, "log_records": 0, "assembled_traces": 0, "skipped_traces": 0}
    assert await fetch(store, "SELECT name FROM spans") == [("s2",)]


async def test_span_rows_and_assembly_records(store):
    log = LogRecord(
        time_unix_nano=5,
        observed_time_unix_nano=6,
        trace_id=f"{7:032x}",
        span_id=f"{8:016x}",
        body={"content": "hi"},
        attributes={"event.name": "gen_ai.user.message"},
    )
    await store.append(
        [_span(7, attributes={"k": [1, 2.5, "x"]}), _span(8, trace=7, parent_span_id=f"{8:016x}"), _span(9)]
    )
    await store.append([], [log])
    rows = await fetch(
        store, "SELECT name, attributes::VARCHAR FROM spans WHERE trace_id = ? ORDER BY name", f"{7:032x}"
    )
    assert [r[0] for r in rows] == ["s7", "s8"] and json.loads(rows[0][1]) == {"k": [1, 2.5, "x"]}
    assert await scalar(store, "SELECT body::VARCHAR FROM log_records WHERE trace_id = ?", f"{7:032x}") == (
        '{"content":"hi"}'
    )
    outcome = await store.append([_span(10, trace=7, parent_span_id=f"{8:016x}")])
    assert outcome.received_from == outcome.received_to > 0
    # the commit's range is exactly that append's rows
    window = "received_at BETWEEN to_timestamp(?) AND to_timestamp(?)"
    assert await fetch(store, f"SELECT name FROM spans WHERE {window}", outcome.received_from, outcome.received_to) == [
        ("s10",)
    ]
    assert await store.assembled_before([f"{7:032x}"]) == {}
    await store.record_assembly(
        [
            AssemblyRecord(
                trace_id=f"{7:032x}",
                reason="complete",
                incomplete=False,
                span_count=2,
                log_count=1,
                run_count=0,
                unmatched_reason="no agent",
                service_name=None,
                root_name="s7",
                log_offsets=(3, 9),
            )
        ]
    )
    before = await store.assembled_before([f"{7:032x}", f"{9:032x}"])
    assert list(before) == [f"{7:032x}"] and before[f"{7:032x}"].offsets == (3, 9)


def _run(i: int, conversation: str | None = "c1", trace: int | None = None) -> AgentRun:
    return numbered_run(i, conversation, trace=trace)


async def test_runs_upsert_replace_and_load(any_store):
    store = any_store
    await store.runs.upsert_runs([_run(1), _run(2), _run(3, trace=1)])
    await store.runs.upsert_runs([_run(2, conversation="c1")])  # same id again: an update, not a second row
    assert await _count(store.queries, "runs") == 3
    # the trace was re-assembled and only run-1 is left in it: run-3 goes
    await store.runs.upsert_runs([_run(1)], replace_traces=[f"{1:032x}"])
    assert sorted(r.run_id for r in await store.runs.load_runs(["run-1", "run-2", "run-3"])) == ["run-1", "run-2"]
    conv = await store.runs.load_conversation("c1")
    assert conv is not None and [r.run_id for r in conv.runs] == ["run-1", "run-2"]
    assert conv.runs[0].input_messages[0].content == "q1"
    assert await store.runs.load_conversation("nope") is None
    assert await store.runs.target_ids("run", since=None, until=None) == ["run-1", "run-2"]
    assert await store.runs.target_ids("conversation", since=None, until=None) == ["c1"]


def _score(i: int, cost: float | None = None, **kw: object) -> ScoreRecord:
    fields: dict[str, object] = {
        "id": f"score-{i}",
        "scorer_id": "s",
        "scorer_name": "S",
        "run_id": f"run-{i}",
        "trace_id": f"{i:032x}",
        "span_id": f"{i:016x}",
        "conversation_id": None,
        "entity_type": "agent",
        "entity_id": "support",
        "source": "live",
        "score": 0.5,
        "reason": "ok",
        "status": "ok",
        "judge_cost_usd": cost,
        "analyze_step_result": {"facts": [1, 2]},
        "metadata": {"run_ids": [f"run-{i}"]},
    }
    fields.update(kw)
    return ScoreRecord(**fields)  # type: ignore[arg-type]


def _decision(i: int, decision: str = "scored") -> DecisionRecord:
    return DecisionRecord(
        id=f"d-{i}",
        scorer_id="s",
        target_type="run",
        target_id=f"run-{i}",
        trace_id=None,
        conversation_id=None,
        decision=decision,
        detail=None,
        sample_rate=1.0,
        source="live",
        score_id=f"score-{i}",
    )


async def test_scores_decisions_budget_recovery_and_export_deliveries(any_store):
    store = any_store
    await store.runs.upsert_runs([_run(1), _run(2)])
    await store.scores.write_scores([_score(1, 0.25), _score(1, 0.5, score=0.9)], [_decision(1)])  # last one wins
    pg = "PostgreSQL" in store.description
    path = "analyze_step_result->'facts'->>1" if pg else "analyze_step_result->>'$.facts[1]'"
    assert await fetch(store.queries, f"SELECT score, judge_cost_usd, {path} FROM scores") == [(0.9, 0.5, "2")]
    # duckdb sums the stored rows' cost; the shared counter adds every stored scoring (both were paid for)
    assert await store.scores.spent_today_usd() == (0.75 if pg else 0.5)
    recovery = await store.scores.unscored_recent(["s"], window_s=3600, conversation_scorer_ids=["s"])
    assert [r.run_id for r in recovery.runs] == ["run-2"]
    # alone, duckdb finds unscored conversations in the window; with claims (postgres, or duckdb
    # serving worker processes) they stay due until claimed and finished
    assert recovery.conversation_ids == ([] if store.coordination else ["c1"])
    if store.coordination:
        claims = await store.coordination.claim_conversations(idle_s=0, lease_s=30, limit=10, max_age_s=3600)
        assert [c.conversation_id for c in claims] == ["c1"]
    # export deliveries: due, claimed (not by another owner), recorded; a re-score is due again
    due = await store.deliveries.due_deliveries("otlp", "me", 10)
    assert [(d.id, d.score, d.service_name) for d in due] == [("score-1", 0.9, "svc")]
    assert await store.deliveries.claim_deliveries(
        "otlp", "other", 30, [Claim(score_id="score-1", version=due[0].version)]
    ) == {"score-1": 0}
    assert await store.deliveries.due_deliveries("otlp", "me", 10) == []  # held by "other"
    outcome = DeliveryOutcome(score_id="score-1", version=due[0].version, status="delivered", attempts=1)
    assert await store.deliveries.record_deliveries("otlp", "other", [outcome], ["otlp"]) == 1
    assert (await store.deliveries.delivery_states("otlp"))[0]["status"] == "delivered"
    assert await fetch(store.queries, "SELECT exported_at IS NOT NULL FROM scores") == [(True,)]
    assert (
        await store.deliveries.due_deliveries("otlp", "me", 10) == []
        and await store.deliveries.next_delivery_due_in("otlp") is None
    )
    await store.scores.write_scores([_score(1, score=0.1)], [])
    assert [d.id for d in await store.deliveries.due_deliveries("otlp", "me", 10)] == ["score-1"]


async def test_query_is_read_only_with_parameters_limit_and_errors(any_store):
    store = any_store
    await store.intake.append([_span(i) for i in range(5)])
    result = await store.queries.query(
        "SELECT name FROM spans WHERE name <> ? ORDER BY name", max_rows=3, timeout_s=10, params=["s0"]
    )
    assert result.rows == [("s1",), ("s2",), ("s3",)] and result.truncated and result.columns == ["name"]
    for sql in ("DELETE FROM spans", "SELECT 1; SELECT 2", "CREATE TABLE x (a INT)"):
        with pytest.raises(ReadOnlyViolation):
            await store.queries.query(sql, max_rows=10, timeout_s=10)
    with pytest.raises(StoreError, match="no_such"):
        await store.queries.query("SELECT * FROM no_such", max_rows=10, timeout_s=10)
    assert await _count(store.queries) == 5


@pytest.mark.parametrize("threads", [None, 3])
async def test_the_store_process_runs_duckdb_with_the_configured_threads(tmp_path, threads):
    store = {"path": str(tmp_path / "t.duckdb")} | ({"threads": threads} if threads else {})
    s = build_span_log(Settings.model_validate({"store": store}))
    await s.start()
    try:
        # the store's own connection (a query runs in the query box, with one thread of its own)
        rows = await s.read(store_ops.rows, "SELECT current_setting('threads')", [])
        assert rows == [(threads or 1,)]  # the default is one
    finally:
        await s.stop()


async def test_a_dead_store_process_fails_pending_requests_and_is_restarted(store, tmp_path):
    pid = store.process_pid
    assert pid is not None
    gate = WriterGate(store, tmp_path, timeout_s=5)
    await gate.__aenter__()
    waiting = asyncio.create_task(store.append([_span(1)]))
    await asyncio.sleep(0)
    await _queued(store)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(StoreError, match="exited"):
        await waiting  # never committed, so never reported as stored
    with pytest.raises(StoreError, match="exited"):
        await gate.__aexit__(None, None, None)
    for _ in range(400):
        if store.process_pid not in (None, pid) and store.accepting and store.write_failure is None:
            break
        await asyncio.sleep(0.05)
    assert (await store.append([_span(2)])).stored == 1
    assert await fetch(store, "SELECT name FROM spans") == [("s2",)]


@pytest.mark.parametrize("met_by", ["write", "query"])
@pytest.mark.parametrize("which", ["main", "span logs"])
async def test_a_database_duckdb_invalidated_is_opened_again_by_a_new_store_process(tmp_path, which, met_by):
    # after a fatal error, or a checkpoint that failed (a full disk), DuckDB refuses every statement
    # on the database until it is attached again, which the process holding it cannot do. DuckDB's
    # debug switch makes a checkpoint fail as a crash in the middle of one would
    store = DuckDBStore(tmp_path / "i.duckdb", duckdb_settings={"debug_checkpoint_abort": "before_header"})
    await store.start()
    try:
        await _invalidated_and_opened_again(store, which, met_by)
    finally:
        await store.stop()


async def _invalidated_and_opened_again(store: DuckDBStore, which: str, met_by: str) -> None:
    await store.append([_span(1)])
    await store.upsert_runs([_run(1)])
    pid = store.process_pid
    catalogs = [await store.read(store_ops.main_catalog)] if which == "main" else list(SPAN_LOGS)
    errors = await store.read(store_ops.checkpoint, catalogs)
    assert len(errors) == len(catalogs) and all("invalidated" in e for e in errors)
    # the first request to meet it fails, naming the cause
    with pytest.raises(StoreError, match="invalidated"):
        if met_by == "query":
            await store.query("SELECT count(*) FROM spans", max_rows=10, timeout_s=10)
        elif which == "main":
            await store.upsert_runs([_run(3)])
        else:
            await store.append([_span(3)])
    if met_by == "query":  # no write needed for the process to go
        await wait_for_async(lambda: store.process_pid not in (None, pid), 20, what="a new store process")
    # the store process exits and is started again; until then writes fail as retryable, never stored
    await wait_for_async(
        lambda: _succeeds(lambda: store.append([_span(2)])), 30, interval_s=0.05, what="the span written"
    )
    await wait_for_async(
        lambda: _succeeds(lambda: store.upsert_runs([_run(2)])), 30, interval_s=0.05, what="the run written"
    )
    assert store.process_pid not in (None, pid) and store.write_failure is None
    # what was committed before is there, once
    assert await fetch(store, "SELECT name FROM spans ORDER BY name") == [("s1",), ("s2",)]
    assert await fetch(store, "SELECT run_id FROM runs ORDER BY run_id") == [("run-1",), ("run-2",)]


async def test_an_error_that_only_quotes_invalidated_does_not_end_the_store_process(store):
    # DuckDB's message is believed once reading each database confirms it: a query's (or a span's)
    # own text in an error must not restart the store
    pid = store.process_pid
    with pytest.raises(StoreError, match="has been invalidated"):
        await store.query("""SELECT CAST('Database "x" has been invalidated' AS INTEGER)""", max_rows=1, timeout_s=10)
    assert (await store.append([_span(1)])).stored == 1
    assert store.process_pid == pid


async def _succeeds(write) -> bool:
    try:
        await write()
    except StoreError:
        return False
    return True


async def test_open_names_the_file_when_it_cannot(tmp_path):
    (tmp_path / "afile").write_text("x")
    s = DuckDBStore(tmp_path / "afile" / "x.duckdb")
    with pytest.raises(StoreError, match="afile"):
        await s.start()


@pytest.mark.parametrize("delay_s", [0.0, 30.0])
async def test_results_writes_wait_to_be_committed_together_and_acknowledgements_do_not(tmp_path, delay_s):
    obs = Observer()
    store = DuckDBStore(tmp_path / "d.duckdb", observer=obs, results_delay_s=delay_s)
    await store.start()
    try:
        first = asyncio.create_task(store.record_assembly([assembly_record(f"{1:032x}")]))
        if not delay_s:
            await first  # committed alone, at once
        outcome = await store.append([_span(5)])  # telemetry is acknowledged while results wait
        assert outcome.stored == 1
        second = asyncio.create_task(store.record_assembly([assembly_record(f"{2:032x}")]))
        await asyncio.sleep(0.2)
        if delay_s:
            assert not first.done() and not second.done()  # both wait (for up to 30 s)
        else:
            await second
    finally:
        await store.stop()  # closing commits what waits, at once
    assert first.result() is None and second.result() is None
    results_commits = [c for c in obs.commits if c == (0, 0)]
    assert len(results_commits) == (1 if delay_s else 2)  # one commit for both writes when they wait
    reopened = DuckDBStore(tmp_path / "d.duckdb")
    await reopened.start()
    try:
        assert await scalar(reopened, "SELECT count(*) FROM assembled_traces") == 2
    finally:
        await reopened.stop()


async def test_a_wrong_belief_that_a_trace_is_new_costs_a_retry_never_a_row(store):
    """After a restart the daemon has forgotten which traces it assembled: late spans make it
    believe a trace is new. The write meets the stored rows' keys and is done again as a replace."""
    run, trace = _run(1), f"{1:032x}"
    await store.upsert_runs([run], new_traces=[trace])
    await store.record_assembly([assembly_record(f"{1:032x}")], new_traces=[trace])
    created = await scalar(store, "SELECT epoch_us(created_at) FROM runs")
    changed = dataclasses.replace(run, status="error", error="late root")
    # alone, then batched with another trace's correct belief (one group commit: it fails as a whole)
    await store.upsert_runs([changed], new_traces=[trace])
    await asyncio.gather(
        store.upsert_runs([changed], new_traces=[trace]),
        store.upsert_runs([_run(2)], new_traces=[f"{2:032x}"]),
        store.record_assembly([dataclasses.replace(assembly_record(f"{1:032x}"), span_count=9)], new_traces=[trace]),
        store.record_assembly([assembly_record(f"{2:032x}")], new_traces=[f"{2:032x}"]),
    )
    assert await fetch(store, "SELECT run_id, status, error, epoch_us(created_at) FROM runs ORDER BY run_id") == [
        ("run-1", "error", "late root", created),
        ("run-2", "ok", None, await scalar(store, "SELECT epoch_us(created_at) FROM runs WHERE run_id = 'run-2'")),
    ]
    assert await fetch(store, "SELECT trace_id, span_count FROM assembled_traces ORDER BY trace_id") == [
        (trace, 9),
        (f"{2:032x}", 1),
    ]
    assert await store.assembled_before([trace, "f" * 32]) == {trace: AssembledBefore((), 9, 0)}
    assert await store.assembled_before([]) == {}
    await store.record_assembly([dataclasses.replace(assembly_record(f"{2:032x}"), log_offsets=(40, 7))])
    assert await store.assembled_before([f"{2:032x}"]) == {f"{2:032x}": AssembledBefore((40, 7), 1, 0)}


async def test_scores_of_new_traces_are_believed_new_and_a_wrong_belief_replaces(store):
    trace = f"{3:032x}"
    await store.upsert_runs([_run(3)], new_traces=[trace])  # assembled for the first time
    decision = dataclasses.replace(_decision(3), trace_id=trace)
    await store.write_scores([_score(3)], [decision])
    created = await scalar(store, "SELECT epoch_us(created_at) FROM scores")
    # the same pair scored again while the trace is still believed new (say the reply was lost and
    # the writer retried): both rows meet their keys, the job is done again as a replace
    await asyncio.gather(
        store.write_scores([_score(3, reason="again")], [dataclasses.replace(decision, detail="x")]),
        store.write_scores([_score(4)], [_decision(4)]),
    )
    assert await fetch(store, "SELECT id, reason, epoch_us(created_at) FROM scores ORDER BY id") == [
        ("score-3", "again", created),
        ("score-4", "ok", await scalar(store, "SELECT epoch_us(created_at) FROM scores WHERE id = 'score-4'")),
    ]
    assert await fetch(store, "SELECT id, detail FROM scoring_decisions ORDER BY id") == [("d-3", "x"), ("d-4", None)]


async def _results(queries) -> tuple[int, int, int, int]:
    return tuple([await _count(queries, t) for t in ("runs", "scores", "scoring_decisions", "score_deliveries")])


async def _write_results(runs, scores, ids: range) -> None:
    await runs.upsert_runs([_run(i) for i in ids])
    await scores.write_scores([_score(i) for i in ids], [_decision(i) for i in ids])


async def test_results_retention_deletes_results_last_written_before_the_cutoff(any_store):
    store = any_store
    await _write_results(store.runs, store.scores, range(1, 4))
    due = await store.deliveries.due_deliveries("otlp", "me", 10)
    await store.deliveries.claim_deliveries("otlp", "me", 30, [Claim(score_id=d.id, version=d.version) for d in due])
    assert (
        await store.deliveries.record_deliveries(
            "otlp",
            "me",
            [DeliveryOutcome(score_id=d.id, version=d.version, status="delivered", attempts=1) for d in due],
            ["otlp"],
        )
        == 3
    )
    await asyncio.sleep(0.05)
    cutoff = dt.datetime.now(dt.UTC)
    await asyncio.sleep(0.05)
    await _write_results(store.runs, store.scores, range(4, 6))
    await store.scores.write_scores([_score(1, score=0.1)], [])  # a re-score is written now: kept, its run is not
    assert await _results(store.queries) == (5, 5, 5, 3)
    assert (await store.runs.prune_results(None)).deleted == {}  # no age given, far within any index budget
    pruned = await store.runs.prune_results(cutoff)
    assert {t: n for t, n in pruned.deleted.items() if n} == {
        "runs": 3,
        "scores": 2,
        "scoring_decisions": 3,
        "score_deliveries": 3,
    }
    assert await fetch(store.queries, "SELECT run_id FROM runs ORDER BY run_id") == [("run-4",), ("run-5",)]
    assert await fetch(store.queries, "SELECT id FROM scores ORDER BY id") == [("score-1",), ("score-4",), ("score-5",)]
    assert sorted(r.run_id for r in await store.runs.load_runs(["run-1", "run-4"])) == ["run-4"]
    # a score delivered before the cutoff and written again since is due again, its old delivery gone
    assert sorted(d.id for d in await store.deliveries.due_deliveries("otlp", "me", 10)) == [
        "score-1",
        "score-4",
        "score-5",
    ]


async def test_the_key_indexes_are_kept_within_their_budget_oldest_results_first(tmp_path):
    # ~80 bytes a key: a budget of 1,250 keys; 12 batches of 60 traces x 7 keys (2 run keys, 2 scores,
    # 2 decisions, the assembly record) are ~5,000; deleted ~400 keys a transaction
    store = DuckDBStore(tmp_path / "b.duckdb", memory_limit="1GB", index_memory_share=1e-4, prune_slice_keys=400)
    await store.start()
    try:
        assert store.max_index_keys == 1250
        for batch in range(12):
            ids = range(batch * 60, (batch + 1) * 60)
            await store.record_assembly([assembly_record(f"{i:032x}") for i in ids])
            await store.upsert_runs([_run(i) for i in ids])
            await store.write_scores(
                [_score(i) for i in ids] + [_score(i, id=f"other-{i}", scorer_id="o") for i in ids],
                [_decision(i) for i in ids] + [_decision(-1 - i) for i in ids],
            )
        pruned = await store.prune_results(None)
        assert pruned.keys == 12 * 60 * 7 and pruned.max_keys == 1250 and pruned.budget_cutoff is not None
        assert pruned.index_bytes is not None and pruned.index_bytes > 0  # DuckDB's own figure
        # ~3,700 keys to go, in slices of the oldest first: no single DELETE holds the stage writer for long
        assert 5 <= pruned.transactions <= 12
        # assembled within ASSEMBLY_KEEP of the newest: a replay may still ask about them, they stay
        assert "assembled_traces" not in pruned.deleted or pruned.deleted["assembled_traces"] == 0
        runs, scores, decisions, _ = await _results(store)
        # what is left of the budget, to the batch (rows committed together carry one time)
        assert 0 < 2 * runs + scores + decisions <= 1250 * 0.8 - 12 * 60 + 6 * 60
        kept = [int(r[0].removeprefix("run-")) for r in await fetch(store, "SELECT run_id FROM runs")]
        assert kept and min(kept) > 0 and sorted(kept) == list(range(min(kept), 12 * 60))  # the newest, all of them
        assert (await store.prune_results(None)).budget_cutoff is None  # within the budget now
        # once the newest is ASSEMBLY_KEEP past them, the assembly records go too
        await _write_results(store, store, range(5000, 5200))
        await store.record_assembly([assembly_record(f"{i:032x}") for i in range(5000, 5200)])
        aged = int((ASSEMBLY_KEEP.total_seconds() + 60) * 1e6)
        await store.write(
            store_ops.execute,
            "UPDATE assembled_traces SET assembled_at = assembled_at - to_microseconds(?) WHERE trace_id < ?",
            [aged, f"{5000:032x}"],
        )
        again = await store.prune_results(None)
        assert again.deleted.get("assembled_traces", 0) > 0 and again.keys is not None and again.keys > 1250
        assert (await store.prune_results(None)).keys <= 1250
        assert await fetch(store, "SELECT count(*) FROM runs WHERE run_id = 'run-5199'") == [(1,)]
    finally:
        await store.stop()


async def test_duckdb_spills_beside_the_database_file_not_into_the_working_directory(store, tmp_path):
    # the main database is attached to an in-memory one, whose own default would be ./.tmp
    rows = await store.read(store_ops.rows, "SELECT current_setting('temp_directory')", [])
    assert rows == [(str(tmp_path / "w.duckdb") + ".tmp",)]
