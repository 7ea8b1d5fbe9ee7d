"""The default ``store.spans: none`` on a full disk: the segment log is the only copy of a trace
until it is assembled, so when the store cannot write the runs of buffered traces they are tried
again, the feed's saved offset stays behind them, and once space is free every acknowledged trace
is assembled and scored, once."""

from __future__ import annotations

import urllib.request

from support.daemon import DaemonProcess, config_dict, wait_for
from support.disk import fill, small_disk
from support.otlp import agent_trace, span_exporter, tracer

SCORERS = [{"id": "non-empty", "prebuilt": "non_empty_response"}]


def _write_errors(daemon: DaemonProcess) -> float:
    """Failed store writes so far (the workers' included), from /metrics."""
    with urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10) as resp:
        lines = resp.read().decode().splitlines()
    return sum(float(line.split()[-1]) for line in lines if line.startswith("tracescorer_store_write_errors_total"))


def _send(grpc_port: int, n: int) -> list[str]:
    exporter = span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{grpc_port}")
    ids = []
    with tracer(exporter, service="disk") as t:
        for i in range(n):
            with t.start_as_current_span("turn") as s:
                agent_trace(t, user=f"question {i}", answer=f"answer {i}")
            ids.append(f"{s.get_span_context().trace_id:032x}")
    return ids


def test_runs_not_written_on_a_full_disk_are_written_once_space_is_free(tmp_path):
    with small_disk(tmp_path, "48m") as disk:
        cfg = config_dict(
            tmp_path,
            workers={"count": 2},
            store={"path": str(disk / "ts.duckdb"), "checkpoint_threshold": "2MB"},
            # no disk reserve: the store's writes fail on the full disk instead of waiting for space
            # (test_disk_reserve.py), and are tried again
            segment_log={"min_free_bytes": 0},
            assembly={"idle_s": 5},  # the traces wait in the buffer while the disk fills (within ~2 s)
            scorers=SCORERS,
        )
        daemon = DaemonProcess(tmp_path, cfg).start()
        try:
            assert daemon.info is not None
            ids = _send(daemon.info.grpc_port, 30)
            filler = disk / "filler"
            fill(filler)
            wait_for(
                lambda: "storing the runs of" in daemon.log(),
                60,
                interval_s=0.2,
                what="the store failing to write the runs on the full disk",
            )
            # counted once per failing streak, not per try (workers tell their counters every few seconds)
            wait_for(lambda: _write_errors(daemon) >= 1, 30, interval_s=0.2, what="the failed writes counted")
            filler.unlink()  # the runs are tried again until they are stored (below), quietly (the log, at the end)
            wait_for(
                lambda: int(daemon.query_json("SELECT count(*) AS n FROM assembled_traces")[0]["n"]) >= len(ids),
                90,
                interval_s=0.25,
                what="every trace assembled once space is free",
            )
            wait_for(
                lambda: int(daemon.query_json("SELECT count(*) AS n FROM scores")[0]["n"]) >= len(ids),
                60,
                interval_s=0.25,
                what="every run scored",
            )
            rows = daemon.query_json(
                "SELECT (SELECT count(*) FROM assembled_traces) AS traces, (SELECT count(*) FROM runs) AS runs, "
                "(SELECT count(*) FROM scores) AS scores, (SELECT count(*) FROM spans) AS spans"
            )[0]
            assembled = {
                r["trace_id"]: r["span_count"]
                for r in daemon.query_json("SELECT trace_id, span_count FROM assembled_traces")
            }
        finally:
            code = daemon.stop()
        log = daemon.log()
        assert code == 0, log[-3000:]
        # once per streak (a nearly full disk may take a small write between failing ones), not once
        # per try: each failure logged after the first follows a line saying writes worked again
        failed, again = log.count("engine: write failed:"), log.count("engine: writes succeed again")
        assert 1 <= failed <= again + 1 and again >= 1, log[-5000:]
        failed, again = log.count("storing the runs of"), log.count("storing runs works again")
        assert 1 <= failed <= again + 2 and again >= 1, log[-5000:]  # two workers
        assert {tid: assembled.get(tid) for tid in ids} == dict.fromkeys(ids, 5), log[-3000:]
        assert int(rows["runs"]) == len(ids) and int(rows["scores"]) == len(ids) and int(rows["spans"]) == 0, rows
