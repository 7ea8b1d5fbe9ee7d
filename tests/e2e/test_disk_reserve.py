"""The disk reserve covers the store's own files: when its writes take the disk of ``store.path``
under half of ``segment_log.min_free_bytes`` the store neither commits nor checkpoints (its files
stay valid, the daemon stops and starts again cleanly), goes on by itself once space is freed, and
every acknowledged trace ends with its run and score, once. A start on a full disk names the path."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from support.daemon import REPO, DaemonProcess, config_dict, query_rows, wait_for
from support.disk import fill, leave, small_disk
from support.otlp import agent_trace, span_exporter, tracer

LOG_RESERVE = 4 << 20  # segment_log.min_free_bytes: the store keeps half of it
WAITING = "nothing is committed nor checkpointed until space is freed"


def _send(daemon: DaemonProcess, n: int, start: int = 0, pad: int = 0) -> list[str]:
    exporter = span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint)
    ids = []
    with tracer(exporter, service="disk") as t:
        for i in range(start, start + n):
            with t.start_as_current_span("turn") as s:
                agent_trace(t, user=f"question {i} " + "q" * pad, answer=f"answer {i} " + "a" * pad)
            ids.append(f"{s.get_span_context().trace_id:032x}")
    return ids


def _readyz(daemon: DaemonProcess) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(daemon.http_url + "/readyz", timeout=10) as resp:
            return dict(json.loads(resp.read()))
    except urllib.error.HTTPError as exc:
        return dict(json.loads(exc.read()))


def _metric(daemon: DaemonProcess, name: str) -> float:
    with urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10) as resp:
        lines = resp.read().decode().splitlines()
    return next(float(line.split()[-1]) for line in lines if line.startswith(name + " "))


def _stored(db_path: str, ids: list[str]) -> dict[str, int]:
    """Runs, distinct traces with a run among ``ids``, scores and distinct scored runs."""
    listed = ", ".join(f"'{tid}'" for tid in ids)
    return query_rows(
        db_path,
        f"SELECT (SELECT count(*) FROM runs WHERE trace_id IN ({listed})) AS runs, "
        f"(SELECT count(DISTINCT trace_id) FROM runs WHERE trace_id IN ({listed})) AS traces, "
        f"(SELECT count(*) FROM scores WHERE trace_id IN ({listed})) AS scores, "
        f"(SELECT count(DISTINCT run_id) FROM scores WHERE trace_id IN ({listed})) AS scored",
    )[0]


def test_the_store_waits_for_space_before_the_disk_is_full_and_goes_on_by_itself(tmp_path: Path) -> None:
    with small_disk(tmp_path, "24m") as disk:
        cfg = config_dict(
            tmp_path,
            workers={"count": 2},
            store={"path": str(disk / "ts.duckdb"), "checkpoint_threshold": "1MB"},
            # the log on another disk: every request is acknowledged, only the store's files grow here
            segment_log={"path": str(tmp_path / "log"), "min_free_bytes": LOG_RESERVE},
            assembly={"idle_s": 0.3},
            shutdown={"grace_s": 4},
            scorers=[{"id": "non-empty", "prebuilt": "non_empty_response"}],
        )
        daemon = DaemonProcess(tmp_path, cfg).start()
        filler = disk / "filler"
        try:
            ids = _send(daemon, 10)
            wait_for(lambda: _stored(daemon.db_path, ids)["scores"] == 10, 30, interval_s=0.2, what="10 scores")
            # a little more than the store's reserve free: the runs and scores of what follows need more
            leave(filler, LOG_RESERVE // 2 + (256 << 10))
            ids += _send(daemon, 300, start=10, pad=4000)
            wait_for(lambda: WAITING in daemon.log(), 30, interval_s=0.2, what="the store to wait for space")
            reason = _readyz(daemon).get("reason") or ""
            assert "the disk is nearly full" in reason and str(disk / "ts.duckdb") in reason, reason
            assert _metric(daemon, "tracescorer_store_disk_free_bytes") < LOG_RESERVE // 2
        finally:
            code = daemon.stop()
        log = daemon.log()
        assert code == 0, log[-3000:]
        assert "No space left on device" not in log and "invalidated" not in log, log[-5000:]
        assert "not checkpointed at close" in log, log[-5000:]  # DuckDB's own checkpoint at close too
        assert shutil.disk_usage(disk).free > 0  # the store stopped before the disk was full
        before = _stored(daemon.db_path, ids)  # the files are valid: read with no daemon
        assert before["runs"] < len(ids), before

        # a start on the disk still short: it serves, its writes wait; once space is freed they go on
        daemon = DaemonProcess(tmp_path, cfg).start()
        try:
            wait_for(
                lambda: "the disk is nearly full" in (_readyz(daemon).get("reason") or ""),
                30,
                interval_s=0.2,
                what="/readyz to say the store's disk is short after the restart",
            )
            filler.unlink()
            wait_for(
                lambda: _stored(daemon.db_path, ids)["scored"] == len(ids),
                60,
                interval_s=0.25,
                what="every trace's run scored once space is free",
            )
            wait_for(lambda: _readyz(daemon).get("ready"), 30, interval_s=0.2, what="ready again")
            stored = _stored(daemon.db_path, ids)
        finally:
            code = daemon.stop()
        log = daemon.log()
        assert code == 0, log[-3000:]
        assert stored == {"runs": len(ids), "traces": len(ids), "scores": len(ids), "scored": len(ids)}, stored
        assert "writes go on" in log and "No space left on device" not in log, log[-5000:]


def _serve_error(tmp_path: Path, cfg: dict[str, Any]) -> str:
    """The last line ``tracescorer serve`` prints when it exits (it must exit, non-zero)."""
    config = tmp_path / "tracescorer.yaml"
    config.write_text(yaml.safe_dump(cfg))
    result = subprocess.run(
        [sys.executable, "-m", "tracescorer", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        cwd=str(REPO),
        timeout=60,
    )
    assert result.returncode != 0, result.stderr
    return result.stderr.strip().splitlines()[-1]


def test_a_start_on_a_full_disk_names_the_path(tmp_path: Path) -> None:
    with small_disk(tmp_path, "16m") as disk:
        cfg = config_dict(
            tmp_path,
            workers={"count": 0},
            store={"path": str(disk / "ts.duckdb")},
            segment_log={"min_free_bytes": 1 << 20},
        )
        assert DaemonProcess(tmp_path, cfg).start().stop() == 0  # a store from before
        fill(disk / "filler")
        # the state file cannot be written (or DuckDB's first write at open failed): either is named
        existing = _serve_error(tmp_path, cfg)
        cfg["store"]["path"] = str(disk / "new.duckdb")
        fresh = _serve_error(tmp_path, cfg)  # DuckDB cannot create the file
    assert existing.startswith(f"Error: cannot write {disk / 'ts.duckdb'}"), existing
    assert fresh.startswith(f"Error: cannot write {disk / 'new.duckdb'}:"), fresh
    for error in (existing, fresh):
        assert f"its disk is full (0 bytes free in {disk})" in error, error
