"""Read commands work in a shell without the daemon's secrets (judge URL and keys, export and
Slack webhooks); ``serve``, ``check-config`` and a daemon-less ``backfill`` still require them and
name every missing variable at once. Real CLI processes against a real daemon, then the file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.daemon import REPO, DaemonProcess, config_dict, query_rows, wait_for
from support.otlp import agent_trace, span_exporter, tracer

SECRETS = {
    "JUDGE_URL": "http://127.0.0.1:9/v1",
    "JUDGE_KEY": "sk-judge",
    "PHOENIX_KEY": "px-key",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.invalid/services/T/B/x",
}


def _config(tmp_path: Path) -> dict[str, object]:
    return config_dict(
        tmp_path,
        assembly={"idle_s": 0.3, "conversation_idle_s": 3600},
        # the stages in the daemon's own process: worker processes (each importing the judge's
        # client at start) would triple its start; tests/e2e/test_workers*.py run them
        workers={"count": 0},
        judge={"model": "openai/gpt-4o-mini", "api_base": "${JUDGE_URL}", "api_key": "${env:JUDGE_KEY}"},
        scorers=[
            {"id": "answered", "prebuilt": "non_empty_response", "threshold": 1},
            {
                "id": "judged",
                "prebuilt": "multi_turn_judge",
                "scope": "conversation",
                "options": {"criterion": "The agent answered."},
            },
        ],
        export={
            "enabled": False,
            "sinks": [{"phoenix": {"endpoint": "http://127.0.0.1:9", "api_key": "${PHOENIX_KEY}"}}],
        },
        monitors=[
            {
                "id": "quality",
                "scorer": "answered",
                "aggregate": "pass_rate",
                "window": "5m",
                "below": 0.5,
                "notify": [{"slack": "${SLACK_WEBHOOK_URL}"}],
            }
        ],
    )


def _bare_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in SECRETS and not k.startswith(("TRACESCORER_", "OTEL_"))}


def _cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracescorer", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        env=_bare_env(),
        cwd=str(REPO),
        timeout=120,
    )


def _reads(daemon: DaemonProcess, trace_id: str, tmp_path: Path, tag: str) -> None:
    config = daemon.config_path
    out = {}
    for args in (
        ("runs",),
        ("scores",),
        ("explain", trace_id),
        ("query", "SELECT count(*) AS n FROM scores"),
        ("report", "--output", str(tmp_path / f"report-{tag}.html")),
        ("monitors",),
    ):
        result = _cli(config, *args)
        assert result.returncode == 0, f"{tag}: tracescorer {args[0]} failed: {result.stderr}"
        assert "is not set" not in result.stderr
        out[args[0]] = result.stdout
    assert "answered" in out["scores"]
    assert "answered: scored 1.0 label=pass" in out["explain"]
    assert (tmp_path / f"report-{tag}.html").stat().st_size > 0


def _missing_all(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode != 0
    for name in SECRETS:
        assert f"${{{name}}} is not set" in result.stderr, result.stderr


def test_read_commands_need_no_secrets_serve_and_check_config_name_them_all(tmp_path: Path) -> None:
    daemon = DaemonProcess(tmp_path, _config(tmp_path), env=SECRETS).start()
    try:
        with tracer(span_exporter("http", http_url=daemon.http_url)) as t:
            agent_trace(t)
        scored = wait_for(
            lambda: query_rows(daemon.db_path, "SELECT trace_id FROM scores WHERE scorer_id = 'answered'"),
            60,
            what="the code scorer's score",
        )
        trace_id = scored[0]["trace_id"]
        _reads(daemon, trace_id, tmp_path, "through the daemon")
        _missing_all(_cli(daemon.config_path, "check-config"))
    finally:
        assert daemon.stop() == 0, daemon.log()

    _reads(daemon, trace_id, tmp_path, "on the file")
    _missing_all(_cli(daemon.config_path, "serve"))
    # backfill without a daemon scores in this process: it needs the judge's variables after all
    _missing_all(_cli(daemon.config_path, "backfill", "--scorer", "judged", "--dry-run"))
