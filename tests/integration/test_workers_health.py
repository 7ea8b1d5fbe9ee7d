"""What the daemon reports of its worker processes' store work: with ``workers.count`` the feed,
assembly and scoring write through the workers' own channels of the store process, so failing
writes and the write queue are theirs; ``/readyz`` and ``/metrics`` still tell of them."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from support.daemon import DaemonProcess, config_dict, wait_for
from support.disk import fill, small_disk
from support.otlp import agent_trace, span_exporter, tracer

pytestmark = pytest.mark.slow


def _readyz(daemon: DaemonProcess) -> dict:
    try:
        with urllib.request.urlopen(daemon.http_url + "/readyz", timeout=10) as resp:
            return dict(json.loads(resp.read()))
    except urllib.error.HTTPError as exc:
        return dict(json.loads(exc.read()))


def _send(daemon: DaemonProcess, n: int, start: int = 0) -> None:
    exporter = span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint)
    with tracer(exporter, service="health") as t:
        for i in range(start, start + n):
            agent_trace(t, user=f"question {i}", answer=f"answer {i}")


def test_store_writes_failing_in_the_workers_make_the_daemon_not_ready_until_they_work_again(tmp_path):
    with small_disk(tmp_path, "48m") as disk:
        cfg = config_dict(
            tmp_path,
            workers={"count": 2},
            # the segment log on another disk: only the store's writes fail
            store={"path": str(disk / "ts.duckdb"), "checkpoint_threshold": "2MB"},
            segment_log={"path": str(tmp_path / "log")},
            assembly={"idle_s": 0.3},
            scorers=[{"id": "non-empty", "prebuilt": "non_empty_response"}],
        )
        daemon = DaemonProcess(tmp_path, cfg).start()
        try:
            _send(daemon, 5)
            daemon.settled()
            assert _readyz(daemon)["ready"]
            filler = disk / "filler"
            fill(filler)
            sent = 5
            for _ in range(60):  # traffic until some worker's write fails (a small one may still fit)
                _send(daemon, 5, sent)
                sent += 5
                reason = _readyz(daemon).get("reason") or ""
                if "store writes are failing" in reason:
                    break
            wait_for(
                lambda: "store writes are failing" in (_readyz(daemon).get("reason") or ""),
                30,
                interval_s=0.2,
                what="/readyz to say the store's writes fail",
            )
            filler.unlink()
            wait_for(lambda: _readyz(daemon)["ready"], 60, interval_s=0.2, what="ready again once writes work")
            daemon.settled()
        finally:
            code = daemon.stop()
        assert code == 0, daemon.log()[-3000:]
