"""A score is written once at a stop or kill: SIGTERM (or kill -9) of the daemon while scoring is in
flight under load, then a restart that scores what was left; no score row is written twice
(``updated_at <> created_at``: a second write, which also reset ``exported_at`` and exported the
score again) and each (run, scorer) has one row."""

from __future__ import annotations

import signal
import threading

import psutil
import pytest
from support.daemon import DaemonProcess, config_dict, store_children, wait_for
from support.routing import Acked, produce_agent_traces

from tracescorer.store.duckdb import open_read_only

SCORERS = ("non-empty", "tone")
PRODUCERS = 2


def _scored(daemon: DaemonProcess) -> int:
    return int(daemon.query_json("SELECT count(*) AS n FROM scores")[0]["n"])


def _unscored(daemon: DaemonProcess) -> int:
    """Runs still missing a score of some scorer."""
    return int(
        daemon.query_json(
            "SELECT count(*) AS n FROM runs r, (SELECT unnest(['non-empty', 'tone']) AS scorer_id) b WHERE NOT EXISTS "
            "(SELECT 1 FROM scores s WHERE s.run_id = r.run_id AND s.scorer_id = b.scorer_id)"
        )[0]["n"]
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_a_stop_under_load_writes_each_score_once(tmp_path, sig):
    cfg = config_dict(
        tmp_path,
        assembly={"idle_s": 0.2},
        # each score write committed at once, not with the next ones: a write sent again at the
        # stop lands in a transaction of its own (with the delay, the two were often one)
        store={"results_delay_s": 0},
        scorers=[
            {"id": "non-empty", "prebuilt": "non_empty_response"},
            {"id": "tone", "prebuilt": "tone_consistency"},
        ],
    )
    daemon = DaemonProcess(tmp_path, cfg).start()
    acked, stop = Acked(1), threading.Event()
    producers = [
        threading.Thread(
            target=produce_agent_traces, args=(daemon.grpc_endpoint, acked, stop, i), kwargs={"service": "once"}
        )
        for i in range(PRODUCERS)
    ]
    try:
        for p in producers:
            p.start()
        # stopped mid-pipeline: some runs scored, others assembled or on their way
        wait_for(lambda: _scored(daemon) >= 400, 60, interval_s=0.05, what="scores under load")
        assert daemon.proc is not None
        [store] = store_children(daemon.proc.pid)
        code = daemon.stop(sig)
    finally:
        stop.set()
        for p in producers:
            p.join(30)
    assert code == (0 if sig == signal.SIGTERM else -signal.SIGKILL), daemon.log()[-3000:]
    # an orphaned store process commits what it was sent and exits, releasing the file's lock
    wait_for(
        lambda: not store.is_running() or store.status() == psutil.STATUS_ZOMBIE,
        30,
        interval_s=0.1,
        what="the store process to exit",
    )

    daemon.start()
    try:
        wait_for(lambda: _unscored(daemon) == 0, 60, interval_s=0.2, what="every run scored after the restart")
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()[-3000:]
    con = open_read_only(daemon.db_path)
    try:
        [(rows, twice, pairs, orphans, runs)] = con.execute(
            "SELECT count(*), count(*) FILTER (updated_at <> created_at), count(DISTINCT (run_id, scorer_id)), "
            "count(*) FILTER (run_id NOT IN (SELECT run_id FROM runs)), (SELECT count(*) FROM runs) FROM scores"
        ).fetchall()
    finally:
        con.close()
    writer = [line for line in daemon.log().splitlines() if "runner.writer" in line]
    assert twice == 0, f"{twice} of {rows} score rows written twice; the score writer said: {writer[-10:]}"
    assert (rows, orphans) == (pairs, 0) and rows == runs * len(SCORERS), (rows, pairs, orphans, runs)
