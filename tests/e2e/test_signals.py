"""Signals to the daemon's process group, as a shell sends them to a background job: SIGHUP (its
terminal closed) reloads the configuration and every process keeps serving (the store and worker
processes ignore it; before, the daemon died with 129, then it drained and stopped); SIGTERM
drains and exits 0, the state file is gone and what was acknowledged is kept (assembled at the
next start if not before)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from support.daemon import DaemonProcess, config_dict, run_dicts, wait_for
from support.otlp import agent_trace, span_exporter, tracer

from tracescorer.control import serve_info_path


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def test_sighup_to_the_process_group_reloads_and_sigterm_drains_and_exits_0(tmp_path: Path) -> None:
    cfg = config_dict(
        tmp_path,
        assembly={"idle_s": 0.2},
        scorers=[{"id": "answered", "prebuilt": "non_empty_response", "threshold": 1}],
    )
    daemon = DaemonProcess(tmp_path, cfg, new_session=True).start()
    assert daemon.proc is not None
    pgid = daemon.proc.pid
    try:
        with tracer(span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint)) as t:
            agent_trace(t)
        wait_for(lambda: daemon.query_json("SELECT id FROM scores"), 60, what="the score")
        os.killpg(pgid, signal.SIGHUP)  # every process of the daemon, as a closing terminal does
        wait_for(lambda: "configuration reloaded" in daemon.log(), 60, what="the reload")
        assert "nothing changed" in daemon.log() and daemon.proc.poll() is None
        with tracer(span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint)) as t:
            agent_trace(t, answer="sent just before the stop")  # acknowledged: it must be stored
        os.killpg(pgid, signal.SIGTERM)
        code = daemon.proc.wait(60)
    finally:
        daemon.stop()
    assert code == 0, daemon.log()
    assert "SIGTERM received, shutting down" in daemon.log()
    assert "tracescorer stopped" in daemon.log() and "(writer did not drain)" not in daemon.log()
    assert not serve_info_path(daemon.db_path).exists()
    wait_for(lambda: _group_gone(pgid), 30, what="the store process to exit too")
    assert len(run_dicts(daemon.db_path)) >= 1
    # what was acknowledged is in the segment log: a trace not assembled before the hangup is at the next start
    again = DaemonProcess(tmp_path, cfg).start()
    try:
        runs = wait_for(lambda: r if len(r := again.runs()) >= 2 else None, 60, what="both runs")
    finally:
        assert again.stop() == 0, again.log()
    assert sorted(m["content"] for r in runs for m in r["output"]) == ["Sunny, 22C", "sent just before the stop"]
