"""A read command that finds neither a daemon nor a database says which store.path it looked at,
where that came from, and to give it the daemon's configuration (``--config``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _tracescorer(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TRACESCORER_")}
    return subprocess.run(
        [sys.executable, "-m", "tracescorer", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**clean, **(env or {})},
        timeout=60,
    )


@pytest.mark.parametrize("command", [["query", "SELECT count(*) FROM scores"], ["runs"], ["scores"]])
def test_without_config_it_names_the_default_path_and_config(tmp_path: Path, command: list[str]) -> None:
    out = _tracescorer(tmp_path, *command)
    assert out.returncode == 1, out
    assert f"no database at {tmp_path / 'tracescorer.duckdb'}" in out.stderr
    assert "no --config given, nor TRACESCORER_CONFIG" in out.stderr and "--config FILE" in out.stderr
    assert not (tmp_path / "tracescorer.duckdb").exists()


def test_with_a_config_it_names_the_file_it_read(tmp_path: Path) -> None:
    config = tmp_path / "ts.yaml"
    config.write_text(f"store:\n  path: {tmp_path / 'data' / 'ts.duckdb'}\n")
    for out in (
        _tracescorer(tmp_path, "query", "SELECT 1", "--config", str(config)),
        _tracescorer(tmp_path, "query", "SELECT 1", env={"TRACESCORER_CONFIG": str(config)}),
    ):
        assert out.returncode == 1, out
        assert f"no database at {tmp_path / 'data' / 'ts.duckdb'} (store.path of {config})" in out.stderr
