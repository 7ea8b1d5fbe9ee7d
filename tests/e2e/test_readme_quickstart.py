"""The README's quick start, extracted from README.md and run as written (so the two cannot drift):
its config, its OpenTelemetry SDK snippet, its read commands and the README's other command lines on
the quick start's data, against a real daemon (tests/unit/test_readme.py checks the rest statically)."""

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


def readme_commands_on_the_quick_start() -> list[list[str]]:
    """The README's other command lines on the quick start's data (``--config quickstart.yaml``)."""
    text = _BLOCK.sub("", (REPO / "README.md").read_text())
    blocks = re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M)
    lines = [shlex.split(line, comments=True) for block in blocks for line in block.splitlines()]
    return [words for words in lines if words[:1] == ["tracescorer"] and "quickstart.yaml" in words]


def test_readme_has_the_quick_start_files():
    assert set(readme_files()) >= {"quickstart.yaml", "first_trace.py", "quickstart.sh"}


def test_quick_start_shows_a_run_and_its_score_within_a_minute(tmp_path):
    files = readme_files()
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    commands = [shlex.split(line.split("#")[0]) for line in files["quickstart.sh"].splitlines()]
    tracescorer = [c for c in commands if c[:1] == ["tracescorer"]]
    assert [c[1] for c in tracescorer] == ["serve", "ready", "runs", "scores"]
    # the trace is sent after `ready`, never before the daemon listens
    assert commands.index(tracescorer[1]) < commands.index(["python", "first_trace.py"])
    wait_ready, reads = tracescorer[1], tracescorer[2:]
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
        ready = subprocess.run(  # as written, right after `serve &`: it waits for the daemon itself
            [sys.executable, "-m", *wait_ready], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120
        )
        assert ready.returncode == 0, (ready.stderr, (tmp_path / "serve.log").read_text())
        info = read_serve_info(db)
        assert info is not None and serve.poll() is None
        sent = subprocess.run(
            [sys.executable, "first_trace.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**env, "OTEL_EXPORTER_OTLP_ENDPOINT": info.url},
            timeout=60,
        )
        assert sent.returncode == 0, sent.stderr
        # the SDK exporter found the daemon listening: no "Connection refused ... retrying" lines
        assert "retrying" not in sent.stderr.lower() and "refused" not in sent.stderr.lower(), sent.stderr
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
        shown = readme_commands_on_the_quick_start()
        assert shown  # the README's command line section runs on the quick start's daemon too
        for words in shown:
            out = subprocess.run(
                [sys.executable, "-m", *words], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60
            )
            assert out.returncode == 0, (words, out.stderr)
    finally:
        serve.terminate()  # what the README's `kill %1` sends
        code = serve.wait(60)
        log.close()
    assert code == 0, (tmp_path / "serve.log").read_text()
    assert (tmp_path / "quickstart.duckdb").exists()  # the data is where the README says


def test_ready_says_why_not_and_waits_no_longer_than_asked(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"store: {{path: {tmp_path / 'none.duckdb'}}}\n")
    out = subprocess.run(
        [sys.executable, "-m", "tracescorer", "ready", "--config", str(cfg), "--wait", "0.5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert "not ready after 0.5s: no daemon is running for" in out.stderr
