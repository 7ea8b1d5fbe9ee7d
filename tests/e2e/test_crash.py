"""kill -9 under load, single daemon on its DuckDB file: nothing acknowledged is lost, and the
restarted daemon assembles and scores what the dead one had not.

Every span is kept as a row (``store.spans: all``), so every acknowledged span can be looked for;
the span-rows feed writes them after the pipeline, at its own pace: the tests wait for them.
"""

from __future__ import annotations

import os
import signal
import threading

import psutil
import pytest
from support.daemon import DaemonProcess, config_dict, store_children, wait_for
from support.kept import ids, rows, wait_runs_once, wait_span_rows
from support.reaper import ReapedDaemon
from support.routing import Acked, produce_agent_traces

PRODUCERS = 3
ACKED_BEFORE_KILL = 1000  # enough load that the kill lands mid-pipeline (some scored, some in flight)
ROWS = {"spans": "all"}  # a row for every span: what the tests look acknowledged spans up in


def _produce(endpoint: str, acked: Acked, stop: threading.Event, index: int) -> None:
    produce_agent_traces(endpoint, acked, stop, index, service="crash")


def _daemon_and_producers(
    tmp_path, **assembly: float
) -> tuple[DaemonProcess, Acked, threading.Event, list[threading.Thread]]:
    """A started daemon scoring with one code scorer, and producer threads (not started) for it."""
    cfg = config_dict(
        tmp_path,
        store=ROWS,
        assembly={"idle_s": 0.3, **assembly},
        scorers=[{"id": "non-empty", "prebuilt": "non_empty_response"}],
        shutdown={"grace_s": 10},
    )
    daemon = DaemonProcess(tmp_path, cfg).start()
    acked, stop = Acked(1), threading.Event()
    producers = [
        threading.Thread(target=_produce, args=(daemon.grpc_endpoint, acked, stop, i), daemon=True)
        for i in range(PRODUCERS)
    ]
    return daemon, acked, stop, producers


def _wait_assembled_and_scored(daemon: DaemonProcess, traces: set[str]) -> None:
    wait_for(
        lambda: (assembled := ids(daemon, "trace_id", "assembled_traces")) is not None and not traces - set(assembled),
        90,
        interval_s=0.25,
        what="every acknowledged trace assembled",
    )
    wait_for(
        lambda: (
            rows(
                daemon,
                "SELECT count(*) AS n FROM runs r WHERE NOT EXISTS "
                "(SELECT 1 FROM scores s WHERE s.run_id = r.run_id AND s.scorer_id = 'non-empty')",
            )
            == [{"n": 0}]
        ),
        90,
        interval_s=0.25,
        what="every run scored",
    )


@pytest.mark.parametrize("victims", ["daemon", "daemon-and-store"])
def test_kill_9_under_load_loses_nothing_acknowledged(tmp_path, victims):
    daemon, acked, stop, producers = _daemon_and_producers(tmp_path)
    try:
        for p in producers:
            p.start()
        wait_for(lambda: len(acked.spans[0]) >= ACKED_BEFORE_KILL, 120, interval_s=0.05, what="spans acknowledged")
        # killed mid-pipeline: some traces assembled and scored, others still on their way
        wait_for(
            lambda: daemon.query_json("SELECT count(*) AS n FROM scores")[0]["n"] > 0,
            60,
            interval_s=0.05,
            what="the first scores",
        )
        assert daemon.proc is not None
        main = psutil.Process(daemon.proc.pid)
        [store] = store_children(main.pid)  # the store process, which owns the DuckDB file
        if victims == "daemon-and-store":
            store.kill()
        assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    except BaseException:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.stop(signal.SIGKILL)  # not left running by a failed wait
        raise
    finally:
        stop.set()
        for p in producers:
            p.join(30)
    # an orphaned store process sees its pipe close and exits, releasing the file's lock
    wait_for(
        lambda: not store.is_running() or store.status() == psutil.STATUS_ZOMBIE,
        30,
        interval_s=0.1,
        what="the store process to exit",
    )
    want_spans = set(acked.spans[0])
    want_traces = set(acked.traces[0])
    assert len(want_spans) >= ACKED_BEFORE_KILL

    daemon.start()
    try:
        # what the dead daemon had not assembled or scored, the new one does
        _wait_assembled_and_scored(daemon, want_traces)
        wait_runs_once(daemon, acked)
        wait_span_rows(daemon, acked)
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()[-3000:]


def _store_child(daemon: DaemonProcess) -> psutil.Process | None:
    assert daemon.proc is not None
    children = store_children(daemon.proc.pid)
    return children[0] if len(children) == 1 else None


def _kill_store_under_load(
    daemon: DaemonProcess, acked: Acked, stop: threading.Event, producers: list[threading.Thread]
) -> None:
    """Kill the store process under load; return once a new one took over and intake went on through it."""
    try:
        for p in producers:
            p.start()
        wait_for(lambda: len(acked.spans[0]) >= ACKED_BEFORE_KILL, 120, interval_s=0.05, what="spans acknowledged")
        old = _store_child(daemon)
        assert old is not None
        old.kill()
        # a new store process serves the same file, and intake goes on through it
        wait_for(
            lambda: (s := _store_child(daemon)) is not None and s.pid != old.pid,
            60,
            interval_s=0.1,
            what="a new store process",
        )
        after = len(acked.spans[0])
        wait_for(
            lambda: len(acked.spans[0]) >= after + ACKED_BEFORE_KILL,
            120,
            interval_s=0.05,
            what="spans acknowledged after the restart",
        )
    finally:
        stop.set()
        for p in producers:
            p.join(30)


def test_a_store_process_killed_under_load_is_restarted_and_nothing_acknowledged_is_lost(tmp_path):
    """The daemon's own restart of its store process (the path DuckDB invalidating a database takes
    too: the store process exits, the daemon starts a new one) through real OTLP clients."""
    # the producers' shutdown drops what they still queue: a trace whose root span was never sent
    # is assembled without it after max_wait_s (here, in the same daemon: no restart's recovery)
    daemon, acked, stop, producers = _daemon_and_producers(tmp_path, max_wait_s=3)
    try:  # the daemon is stopped whatever fails
        _kill_store_under_load(daemon, acked, stop, producers)
        want_traces = set(acked.traces[0])
        _wait_assembled_and_scored(daemon, want_traces)
        wait_runs_once(daemon, acked)
        wait_span_rows(daemon, acked)
        assert daemon.log().count("store process exited unexpectedly") == 1, daemon.log()[-3000:]  # the new one stays
    finally:
        code = daemon.stop()
    log = daemon.log()
    assert code == 0, log[-3000:]
    assert "store process exited unexpectedly" in log and "store process restarted" in log, log[-3000:]


def test_kill_9_of_the_daemon_lets_its_store_process_commit_and_exit_0(tmp_path):
    """Three times: the daemon killed under load; its store process, orphaned, commits what it
    was sent and exits 0 (no ConnectionResetError from the reset socket, no abort at exit); once the
    next start has fed the segment log's tail, every acknowledged span has its row and every
    acknowledged trace is assembled, each whole one with its one run."""
    cfg = config_dict(
        tmp_path,
        store=ROWS,
        assembly={"idle_s": 0.3},
        scorers=[{"id": "non-empty", "prebuilt": "non_empty_response"}],
        shutdown={"grace_s": 10},
    )
    acked = Acked(1)
    for round_ in range(3):
        daemon = ReapedDaemon(tmp_path, cfg).start()
        stop = threading.Event()
        producers = [
            threading.Thread(target=_produce, args=(daemon.grpc_endpoint, acked, stop, i), daemon=True)
            for i in range(PRODUCERS)
        ]
        before = len(acked.spans[0])
        try:
            for p in producers:
                p.start()
            wait_for(lambda n=before + 300: len(acked.spans[0]) >= n, 120, interval_s=0.05, what="spans acknowledged")
            [store] = store_children(daemon.daemon_pid)
            os.kill(daemon.daemon_pid, signal.SIGKILL)  # under load: replies in flight, unread
            assert daemon.exit_code(store.pid) == 0, f"round {round_}: {daemon.log()[-3000:]}"
        finally:
            stop.set()
            for p in producers:
                p.join(30)
            daemon.stop()  # the subreaper, gone once the store process exited
    log = daemon.log()
    assert log.count("the daemon went away: committing what it sent") == 3, log[-3000:]
    for sign in ("Traceback", "ConnectionResetError", "Aborted", "terminate called"):
        assert sign not in log, log[-3000:]
    # what the last round acknowledged is in the segment log: the next start stores it
    final = DaemonProcess(tmp_path, cfg).start()
    try:
        _wait_assembled_and_scored(final, set(acked.traces[0]))
        wait_runs_once(final, acked)
        wait_span_rows(final, acked)
    finally:
        code = final.stop()
    assert code == 0, final.log()[-3000:]
