"""Worker processes (``workers.count``): each takes its share of the trace ids from the segment log.
Every trace is assembled and scored once whichever worker has it, a conversation whose turns land
on different workers is scored once, and a worker killed under load is started again with nothing
acknowledged lost and nothing stored or scored twice."""

from __future__ import annotations

import json
import signal
import threading
import urllib.request

import psutil
import pytest
from fakes.fake_openai import FakeOpenAI, Reply
from support.daemon import DaemonProcess, config_dict, store_children, wait_for
from support.kept import wait_runs_once, wait_span_rows
from support.routing import Acked, RoutingExporter, SequentialTraceIds, produce_agent_traces

from tracescorer.demo import emit_conversations
from tracescorer.feed.partition import Partition
from tracescorer.store.duckdb import open_read_only

CONV = "conversation-across-workers"
ROWS = {"spans": "all"}  # a row for every span: what the tests look acknowledged spans up in


def _workers(daemon: DaemonProcess) -> list[psutil.Process]:
    assert daemon.proc is not None
    found = []
    for p in psutil.Process(daemon.proc.pid).children():
        try:  # a worker killed a moment ago is gone before it is looked at
            if p.status() != psutil.STATUS_ZOMBIE and "tracescorer.workers.child" in " ".join(p.cmdline()):
                found.append(p)
        except psutil.NoSuchProcess:
            continue
    return found


def _with_runs(daemon: DaemonProcess, traces: list[str]) -> int:
    """How many of ``traces`` have a run (asked a part at a time: a query answers 10,000 rows at most)."""
    found = 0
    for at in range(0, len(traces), 2000):
        listed = ", ".join(f"'{t}'" for t in traces[at : at + 2000])
        found += _count(daemon, f"SELECT count(DISTINCT trace_id) AS n FROM runs WHERE trace_id IN ({listed})")
    return found


def _count(daemon: DaemonProcess, sql: str) -> int:
    return int(daemon.query_json(sql)[0]["n"])


@pytest.fixture
def fake():
    with FakeOpenAI(default=Reply.json({"satisfied": True, "reasoning": "every question answered"})) as server:
        yield server


def test_a_conversation_split_across_workers_is_scored_once(tmp_path, fake):
    cfg = config_dict(
        tmp_path,
        workers={"count": 2},
        assembly={"idle_s": 0.3, "conversation_idle_s": 1.5},
        judge={"model": "openai/gpt-4o-mini", "api_base": fake.base_url, "api_key": "k", "timeout_s": 30},
        scorers=[
            {
                "id": "conversation-judge",
                "prebuilt": "multi_turn_judge",
                "scope": "conversation",
                "options": {"criterion": "The agent answered every question"},
                "threshold": 1,
            },
            {"id": "non-empty", "prebuilt": "non_empty_response", "scope": "run"},
        ],
        shutdown={"grace_s": 10},
    )
    daemon = DaemonProcess(tmp_path, cfg).start()
    try:
        workers = _workers(daemon)
        assert len(workers) == 2
        readyz = json.loads(urllib.request.urlopen(daemon.http_url + "/readyz", timeout=10).read())
        assert readyz["ready"] and sorted(w["pid"] for w in readyz["detail"]["workers"]) == sorted(
            w.pid for w in workers
        )
        assert {w["worker"]: w["down"] for w in readyz["detail"]["workers"]} == {"w0": None, "w1": None}
        acked = Acked(1)
        turns = [(f"split question {i}?", None, None, None, f"split answer {i}.") for i in range(4)]
        emit_conversations(
            "",
            [{"id": CONV, "agent": "support", "turns": turns}],
            exporter=RoutingExporter([daemon.grpc_endpoint], acked),
            id_generator=SequentialTraceIds(1000),  # consecutive ids: the turns alternate between the workers
        )
        shares = {Partition(0, 2).owns_hex(t) for t in acked.traces[0]}
        assert shares == {True, False}, "the turns landed on both workers"
        row = wait_for(
            lambda: daemon.query_json("SELECT * FROM scores WHERE scorer_id = 'conversation-judge'") or None,
            60,
            interval_s=0.2,
            what="the conversation score",
        )[0]
        assert row["conversation_id"] == CONV and row["score"] == 1.0
        assert sorted(json.loads(row["metadata"])["run_ids"]) == sorted(
            r["run_id"] for r in daemon.query_json(f"SELECT run_id FROM runs WHERE conversation_id = '{CONV}'")
        )
        wait_for(
            lambda: _count(daemon, "SELECT count(*) AS n FROM scores WHERE scorer_id = 'non-empty'") == 4,
            30,
            interval_s=0.2,
            what="every turn scored",
        )
        # its owner (one worker) tracked it and scored it once: nothing is tracked any more, every
        # turn was told to the owner (the workers' counters reach the daemon's /metrics every 2 s)
        wait_for(
            lambda: (
                daemon.metric("tracescorer_conversations_tracked") == 0
                and daemon.metric("tracescorer_assembly_runs_total") == 4
            ),
            30,
            interval_s=0.2,
            what="the workers' metrics",
        )
        assert sum(1 for r in fake.requests if "split answer" in r.prompt_text) == 1
        assert _count(daemon, "SELECT count(*) AS n FROM scores WHERE scorer_id = 'conversation-judge'") == 1
        assert daemon.metric("tracescorer_worker_resident_memory_bytes") > 0
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()[-3000:]


def _produce(endpoint: str, acked: Acked, stop: threading.Event, index: int) -> None:
    produce_agent_traces(endpoint, acked, stop, index, service="workers", keep_queued=True)


def test_a_worker_killed_under_load_is_started_again_nothing_lost_nothing_twice(tmp_path):
    cfg = config_dict(
        tmp_path,
        workers={"count": 2},
        assembly={"idle_s": 0.3},
        segment_log={"segment_bytes": 1 << 16},  # many segments: released once both workers passed them
        store=ROWS,
        scorers=[{"id": "non-empty", "prebuilt": "non_empty_response"}],
        shutdown={"grace_s": 10},
    )
    daemon = DaemonProcess(tmp_path, cfg).start()
    acked, stop = Acked(1), threading.Event()
    producers = [
        threading.Thread(target=_produce, args=(daemon.grpc_endpoint, acked, stop, i), daemon=True) for i in range(2)
    ]
    try:
        for p in producers:
            p.start()
        wait_for(lambda: _count(daemon, "SELECT count(*) AS n FROM scores") > 50, 60, what="the first scores")
        victim = _workers(daemon)[0]
        victim.kill()
        wait_for(
            lambda: len(_workers(daemon)) == 2 and victim.pid not in {w.pid for w in _workers(daemon)},
            60,
            interval_s=0.1,
            what="the worker started again",
        )
        after = len(acked.spans[0])
        wait_for(lambda: len(acked.spans[0]) >= after + 1000, 60, interval_s=0.05, what="intake after the restart")
    finally:
        stop.set()
        for p in producers:
            p.join(30)
    try:
        # traces whose every span was acknowledged (the SDK's queue drops spans when it is full:
        # a trace without its root waits assembly.max_wait_s, past this test)
        size = max(acked.trace_spans[0].values())
        want_traces = {t for t, n in acked.trace_spans[0].items() if n == size}
        wait_for(
            lambda: _with_runs(daemon, sorted(want_traces)) == len(want_traces),
            90,
            interval_s=0.5,
            what="every acknowledged trace's run",
        )
        runs_scored = (
            "SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM scores) AS scores, "
            "(SELECT count(DISTINCT run_id) FROM scores) AS scored"
        )
        try:
            wait_for(
                lambda: (c := daemon.query_json(runs_scored)[0])["runs"] == c["scores"] == c["scored"],
                60,
                interval_s=0.25,
                what="every run scored once",
            )
        except TimeoutError:
            unscored = (
                "SELECT r.trace_id FROM runs r WHERE NOT EXISTS (SELECT 1 FROM scores s WHERE s.run_id = r.run_id)"
            )
            raise AssertionError(
                f"not every run scored once: {daemon.query_json(runs_scored)}, unscored "
                f"{daemon.query_json(unscored)[:5]}, decisions "
                f"{daemon.query_json('SELECT decision, count(*) AS n FROM scoring_decisions GROUP BY 1')}\n"
                + daemon.log()[-4000:]
            ) from None
        assert daemon.metric("tracescorer_worker_restarts_total") == 1
        wait_span_rows(daemon, acked)  # the killed worker's span-rows feed too: no row lost, none twice
        # every worker passed the log's segments: they are deleted (a few kept: the one written,
        # the one a worker's last saved offset is in)
        wait_for(lambda: daemon.metric("tracescorer_log_bytes") < 4 * (1 << 16), 30, what="segments released")
        # no trace assembled or scored twice (a second judge call and evaluation event): not one the
        # killed worker had assembled (the restarted one replays the log from its saved offset and
        # compares with the assembly records, which the store committed before greeting it), nor one
        # both its feed and its recovery brought
        rewritten = (
            "SELECT (SELECT count(*) FROM runs WHERE updated_at <> created_at) AS runs, "
            "(SELECT count(*) FROM scores WHERE updated_at <> created_at) AS scores"
        )
        again = daemon.query_json(rewritten)
        assert again == [{"runs": 0, "scores": 0}], (again, daemon.log()[-8000:])
        # the workers' scores reach the daemon's score metrics (its exporter reads the scores table),
        # those the killed worker had committed but not told the daemon yet (454 once, on a loaded
        # machine) are stored, not counted; 12 more runs are all counted
        live = "SELECT count(*) AS n FROM scores WHERE source = 'live'"
        counted, rows = daemon.metric("tracescorer_score_results_total"), _count(daemon, live)
        assert counted > 0
        extra = [{"id": f"after-{i}", "agent": "a", "turns": [("q", None, None, None, "answer")]} for i in range(12)]
        emit_conversations(daemon.grpc_endpoint, extra)
        wait_for(lambda: _count(daemon, live) == rows + 12, 60, interval_s=0.2, what="the 12 more runs scored")
        wait_for(
            lambda: daemon.metric("tracescorer_score_results_total") >= counted + 12,
            30,
            interval_s=0.2,
            what="the score metrics",
        )
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()[-3000:]
    con = open_read_only(daemon.db_path)
    try:
        decisions = con.execute(
            "SELECT count(*) FROM (SELECT target_id FROM scoring_decisions GROUP BY target_id, scorer_id HAVING count(*) > 1)"
        ).fetchone()[0]
    finally:
        con.close()
    assert decisions == 0


def _unscored(db_path: str) -> int:
    """Runs without their score in the file (the daemon stopped)."""
    con = open_read_only(db_path)
    try:
        return con.execute(
            "SELECT count(*) FROM runs r WHERE NOT EXISTS (SELECT 1 FROM scores s WHERE s.run_id = r.run_id)"
        ).fetchone()[0]
    finally:
        con.close()


@pytest.mark.parametrize("after", [3, 0])
def test_kill_9_then_a_new_worker_count_stores_nothing_twice_and_loses_nothing(tmp_path, after):
    """The daemon killed under load with two workers, started again with three (or none): the new
    feeds go on from where the old ones stood, each request's items taken once."""

    def config(workers: int) -> dict:
        return config_dict(
            tmp_path,
            workers={"count": workers},
            store=ROWS,
            assembly={"idle_s": 0.3},
            scorers=[{"id": "non-empty", "prebuilt": "non_empty_response"}],
            shutdown={"grace_s": 10},
        )

    daemon = DaemonProcess(tmp_path, config(2)).start()
    acked, stop = Acked(1), threading.Event()
    producers = [
        threading.Thread(
            target=produce_agent_traces,
            args=(daemon.grpc_endpoint, acked, stop, i),
            kwargs={"service": "resize"},
            daemon=True,
        )
        for i in range(2)
    ]
    try:
        for p in producers:
            p.start()
        wait_for(lambda: len(acked.spans[0]) >= 1500, 120, interval_s=0.05, what="spans acknowledged")
        wait_for(lambda: _count(daemon, "SELECT count(*) AS n FROM scores") > 0, 60, what="the first scores")
        assert daemon.proc is not None
        [store] = store_children(daemon.proc.pid)
        for worker in _workers(daemon):  # mid-pipeline, rows stored past the offsets they saved
            worker.kill()
        assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    finally:
        stop.set()
        for p in producers:
            p.join(30)
    wait_for(lambda: not store.is_running() or store.status() == psutil.STATUS_ZOMBIE, 60, what="the store to exit")

    daemon = DaemonProcess(tmp_path, config(after)).start()
    try:
        wait_runs_once(daemon, acked, timeout_s=120)
        wait_span_rows(daemon, acked)  # each request's span rows stored by one span-rows feed, once
        wait_for(
            lambda: (
                _count(
                    daemon,
                    "SELECT count(*) AS n FROM runs r WHERE NOT EXISTS (SELECT 1 FROM scores s WHERE s.run_id = r.run_id)",
                )
                == 0
            ),
            60,
            interval_s=0.25,
            what="every run scored",
        )
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()[-3000:]
    assert _unscored(daemon.db_path) == 0
