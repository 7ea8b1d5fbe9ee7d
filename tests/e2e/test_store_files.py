"""``tracescorer serve`` creates the database's folder 0700 and its files 0600 (the state file
already was), whatever the umask it was started with."""

from __future__ import annotations

import os
import stat

from support.daemon import DaemonProcess, plain_config


def test_serve_creates_the_folder_and_files_for_its_user_alone(tmp_path):
    folder = tmp_path / "data"
    cfg = plain_config(tmp_path, store={"path": str(folder / "ts.duckdb")})
    daemon = DaemonProcess(tmp_path, cfg, preexec_fn=lambda: os.umask(0o022)).start()
    try:
        assert daemon.query_json("SELECT count(*) AS n FROM spans") == [{"n": 0}]
    finally:
        assert daemon.stop() == 0, daemon.log()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    files = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir() if p.is_file()}
    assert {"ts.duckdb", "ts.spans-a.duckdb", "ts.spans-b.duckdb"} <= set(files)
    assert all(mode == 0o600 for mode in files.values()), files
    log_dir = folder / "ts.duckdb.log"  # the segment log: its folder and segments the user's alone too
    assert stat.S_IMODE(log_dir.stat().st_mode) == 0o700
    segments = {p.name: stat.S_IMODE(p.stat().st_mode) for p in log_dir.iterdir()}
    assert segments and all(mode == 0o600 for mode in segments.values()), segments
