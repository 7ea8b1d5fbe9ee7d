"""The README's quick start, extracted from README.md and run as written (so the two cannot drift):
its config, its OpenTelemetry SDK snippet, and its read commands against a real daemon."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

from support.daemon import REPO, query_rows, wait_for

from tracescorer.control import read_serve_info

_BLOCK = re.compile(r"<!-- file: (?P<name>[\w.]+) -->\n```\w*\n(?P<body>.*?)```", re.S)


def readme_files() -> dict[str, str]:
    return {m["name"]: m["body"] for m in _BLOCK.finditer((REPO / "README.md").read_text())}


def test_readme_has_the_quick_start_files():
    assert set(readme_files()) >= {"quickstart.yaml", "first_trace.py", "quickstart.sh"}


def test_quick_start_shows_a_run_and_its_score_within_a_minute(tmp_path):
    files = readme_files()
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    commands = [shlex.split(line.split("#")[0]) for line in files["quickstart.sh"].splitlines()]
    reads = [c for c in commands if c[:1] == ["tracescorer"] and c[1] != "serve"]
    assert [c[1] for c in reads] == ["runs", "scores"]
    # the README's default ports may be taken on a shared machine: any free port here, same config
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORER_", "OTEL_"))},
        "TRACESCORER_RECEIVER__GRPC__PORT": "0",
        "TRACESCORER_RECEIVER__HTTP__PORT": "0",
        "TRACESCORER_API__PORT": "0",
    }
    log = open(tmp_path / "serve.log", "wb")
    serve = subprocess.Popen(
        [sys.executable, "-m", "tracescorer", "serve", "--config", "quickstart.yaml"],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        db = str(tmp_path / "quickstart.duckdb")
        info = wait_for(lambda: serve.poll() is None and read_serve_info(db), 30, what="serve to start")
        sent = subprocess.run(
            [sys.executable, "first_trace.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**env, "OTEL_EXPORTER_OTLP_ENDPOINT": info.url},
            timeout=60,
        )
        assert sent.returncode == 0, sent.stderr
        trace_id = sent.stdout.split()[-1]

        wait_for(lambda: query_rows(db, "SELECT id FROM scores"), 60, interval_s=0.1, what="the quick start's score")
        scores = subprocess.run(
            [sys.executable, "-m", *reads[1]], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60
        ).stdout
        assert "answered" in scores and "1.0" in scores and "pass" in scores
        runs = subprocess.run(
            [sys.executable, "-m", *reads[0]], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60
        )
        assert runs.returncode == 0 and "weather-bot" in runs.stdout and "Sunny and 22C." in runs.stdout
        explain = subprocess.run(
            [sys.executable, "-m", "tracescorer", "explain", trace_id, "--config", "quickstart.yaml"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert "answered: scored 1.0 label=pass" in explain.stdout
    finally:
        serve.terminate()  # what the README's `kill %1` sends
        code = serve.wait(60)
        log.close()
    assert code == 0, (tmp_path / "serve.log").read_text()
    assert (tmp_path / "quickstart.duckdb").exists()  # the data is where the README says
