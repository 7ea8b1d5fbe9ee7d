"""Starting over: ``tracescorer serve`` refuses a new database beside the segment log folder an old
one left (it would replay that traffic and score it again), naming the folder and what to do, and
refuses a segment log folder of another database; a normal restart is not refused, and once the
folder is gone a new database starts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.daemon import DaemonProcess, config_dict, wait_for
from support.otlp import agent_trace, span_exporter, tracer

from tracescorer.store.duckdb import layout

SCORERS = [{"id": "nonempty", "prebuilt": "non_empty_response"}]


def _scored(daemon: DaemonProcess) -> int:
    return int(daemon.query_json("SELECT count(*) AS n FROM scores")[0]["n"])


def _refusal(daemon: DaemonProcess) -> str:
    with pytest.raises(RuntimeError, match="daemon exited") as info:
        daemon.start()
    return str(info.value)


def test_a_new_database_beside_an_old_segment_log_is_refused_a_restart_is_not(tmp_path: Path) -> None:
    cfg = config_dict(tmp_path, assembly={"idle_s": 0.2}, scorers=SCORERS)
    db = cfg["store"]["path"]
    folder = f"{db}.log"
    daemon = DaemonProcess(tmp_path, cfg).start()
    try:
        with tracer(span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint)) as t:
            agent_trace(t)
        wait_for(lambda: _scored(daemon) == 1, 60, interval_s=0.1, what="the run's score")
    finally:
        assert daemon.stop() == 0
    assert (Path(folder) / layout.LOG_STAMP).is_file()

    daemon.start()  # a normal restart: the same database, its own segment log
    try:
        assert _scored(daemon) == 1
    finally:
        assert daemon.stop() == 0

    for name in layout.files(db):  # started over as one would: the databases deleted, the folder forgotten
        Path(name).unlink(missing_ok=True)
    message = _refusal(daemon)
    assert f"the segment log folder {folder} was left by another database" in message, message
    assert "score its traces again" in message and "delete it too (or move it away)" in message
    assert not os.path.exists(db)  # nothing was created

    shutil.rmtree(folder)  # as told
    daemon.start()
    try:
        assert _scored(daemon) == 0  # nothing of the old traffic came back
    finally:
        assert daemon.stop() == 0


def test_a_segment_log_folder_of_another_database_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = DaemonProcess(tmp_path / "a", config_dict(tmp_path / "a", scorers=SCORERS)).start()
    try:
        with tracer(span_exporter("grpc", grpc_endpoint=a.grpc_endpoint)) as t:
            agent_trace(t)
        a.settled()
    finally:
        assert a.stop() == 0
    a_folder = f"{a.db_path}.log"
    b_cfg = config_dict(tmp_path / "b", scorers=SCORERS)
    b = DaemonProcess(tmp_path / "b", b_cfg).start()  # b's database, with an id of its own
    assert b.stop() == 0
    b_cfg["segment_log"] = {"path": a_folder}  # then pointed at a's segment log
    message = _refusal(DaemonProcess(tmp_path / "b", b_cfg))
    assert f"the segment log folder {a_folder} belongs to another database" in message, message
    assert str(b.db_path) in message and "Move the folder away" in message
