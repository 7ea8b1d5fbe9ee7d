"""A newcomer's first hour, through the real CLI: configuration errors that name the problem
(check-config and serve alike), what the daemon says at start, output formats, explain, the
prebuilt list, and read commands while a daemon runs (never the locked file)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml
from fakes.fake_openai import FakeOpenAI, Reply
from support.daemon import REPO, DaemonProcess, config_dict, wait_for

from tracescorer.control import ServeInfo, write_serve_info
from tracescorer.demo import emit_conversations

TAG = "[verdict by the fake judge]"
LONG_REASONING = (
    "The assistant answered both questions, kept the tone polite, gave the delivery date "
    "and confirmed the address change without asking for anything it already had. " + TAG
)


def tracescorer(
    *args: str, env: dict[str, str] | None = None, cwd: Path = REPO, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """One CLI process with a clean TRACESCORER_* environment plus ``env``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("TRACESCORER_")}
    return subprocess.run(
        [sys.executable, "-m", "tracescorer", *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        cwd=str(cwd),
        timeout=timeout,
    )


def write_config(tmp_path: Path, data: dict | str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


# --- configuration -----------------------------------------------------------------------------------


def test_partial_env_override_keeps_the_listeners_own_port(tmp_path):
    out = tracescorer("check-config", env={"TRACESCORER_RECEIVER__HTTP__HOST": "127.0.0.1"}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    receiver = yaml.safe_load(out.stdout)["receiver"]
    assert receiver["http"] == {"host": "127.0.0.1", "port": 4318, "enabled": True}
    assert receiver["grpc"]["port"] == 4317
    assert "configuration is valid" in out.stderr and "no scorers are bound" in out.stderr


@pytest.mark.parametrize("command", ["check-config", "serve"])
@pytest.mark.parametrize(
    "setup,env,message",
    [
        ({"store": {"path": "${TS_DATA_DIR}/ts.duckdb"}}, {}, "store.path: ${TS_DATA_DIR} is not set"),
        ({}, {"TRACESCORER_STOER__PATH": "/tmp/x.duckdb"}, "TRACESCORER_STOER__PATH: unknown section 'stoer'"),
        (
            {},
            {"TRACESCORER_STORE__PAHT": "/tmp/x.duckdb"},
            "store.paht: unknown key (did you mean 'path'?) (from TRACESCORER_STORE__PAHT)",
        ),
        (
            {"scorers": [{"id": "x", "prebuilt": "no_such_scorer"}]},
            {},
            "scorers[0] (x): unknown prebuilt scorer 'no_such_scorer'",
        ),
        (
            {"scorers": [{"id": "x", "python": "no_such_module_anywhere:scorer"}]},
            {},
            "cannot import module 'no_such_module_anywhere'",
        ),
        ({"scorers": [{"id": "judge", "prebuilt": "answer_relevancy"}]}, {}, "is an LLM judge and needs a model"),
        (
            {"scorers": [{"id": "x", "prebuilt": "completeness", "options": {"scael": 2}}]},
            {},
            "scorers[0] (x): prebuilt 'completeness': unknown option 'scael' (did you mean 'scale'?); "
            "valid options: scale",
        ),
        (
            {
                "scorers": [{"id": "x", "prebuilt": "completeness", "threshold": 0.5}],
                "monitors": [{"id": "quality", "scorer": "x", "aggregate": "mean", "window": "30 min", "below": 1}],
            },
            {},
            "invalid configuration: monitors.0 (quality).window: '30 min' is not a duration",
        ),
        (
            {"store": {"path": "${DATA_DIR}/ts.duckdb"}, "judge": {"api_key": "${env:JUDGE_KEY}"}},
            {},
            "judge.api_key: ${JUDGE_KEY} is not set in the environment; store.path: ${DATA_DIR} is not set",
        ),
    ],
)
def test_config_errors_name_the_key_in_check_config_and_serve(tmp_path, command, setup, env, message):
    cfg = write_config(tmp_path, {**config_dict(tmp_path), **setup})
    out = tracescorer(command, "--config", str(cfg), env=env)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1  # one message, no traceback


@pytest.mark.parametrize("command", ["check-config", "serve"])
def test_store_path_below_a_file(tmp_path, command):
    (tmp_path / "afile").write_text("x")
    cfg = write_config(tmp_path, config_dict(tmp_path, store={"path": str(tmp_path / "afile" / "ts.duckdb")}))
    out = tracescorer(command, "--config", str(cfg))
    assert out.returncode == 1
    assert (
        f"store.path: '{tmp_path / 'afile' / 'ts.duckdb'}' is below '{tmp_path / 'afile'}', which is a file"
        in out.stderr
    )


def test_missing_store_directory_is_announced_and_created(tmp_path):
    db = tmp_path / "new" / "dir" / "ts.duckdb"
    cfg = config_dict(tmp_path, store={"path": str(db)})
    out = tracescorer("check-config", "--config", str(write_config(tmp_path, cfg)))
    assert out.returncode == 0 and f"directory {db.parent} does not exist yet; serve will create it" in out.stderr
    daemon = DaemonProcess(tmp_path, cfg).start()
    assert daemon.stop() == 0
    assert db.exists() and f"store.path: created directory {db.parent}" in daemon.log()
    # a daemon with no scorers says so at start (the start-up line of bound ones: the next test)
    assert "WARNING tracescorer.app: no scorers are bound" in daemon.log()


@pytest.mark.parametrize("listener", ["http", "grpc"])
def test_bind_errors_name_the_receiver_and_address(tmp_path, listener):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cfg = config_dict(tmp_path, receiver={listener: {"host": "127.0.0.1", "port": port}})
        out = tracescorer("serve", "--config", str(write_config(tmp_path, cfg)))
    name = {"http": "OTLP HTTP receiver (receiver.http)", "grpc": "OTLP gRPC receiver (receiver.grpc)"}[listener]
    assert out.returncode == 1
    assert f"{name}: cannot listen on 127.0.0.1:{port}" in out.stderr


# --- a daemon with a conversation judged ----------------------------------------------------------------

CONV = {
    "id": "conv-first-hour",
    "agent": "support-alpha",
    "turns": [
        (
            "Where is my order 7?",
            "track_order",
            {"order": 7},
            "in transit",
            "Order 7 is in transit and arrives on Friday, between nine and noon, at the address you gave us.",
        ),
        (
            "Can I change the address?",
            None,
            None,
            None,
            "Yes, I changed the delivery address of order 7 to the new one.",
        ),
    ],
}


# the stages in the daemon's own process: these tests read what was scored, and worker processes
# (each importing the judge's client at start) would triple a daemon's start; tests/e2e/test_workers*.py
# run them
IN_PROCESS = {"count": 0}


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("first-hour")
    with FakeOpenAI() as fake:
        fake.script("Criterion:", Reply.json({"satisfied": True, "reasoning": LONG_REASONING}))
        cfg = config_dict(
            tmp,
            assembly={"idle_s": 0.1, "conversation_idle_s": 0.3},
            workers=IN_PROCESS,
            judge={"model": "openai/gpt-4o-mini", "api_base": fake.base_url, "api_key": "k"},
            scorers=[
                {"id": "non-empty", "prebuilt": "non_empty_response", "threshold": 1},
                {
                    "id": "conversation-judge",
                    "prebuilt": "multi_turn_judge",
                    "scope": "conversation",
                    "options": {"criterion": "The agent answered every question"},
                    "threshold": 1,
                },
            ],
        )
        daemon = DaemonProcess(tmp, cfg).start()
        try:
            emit_conversations(daemon.grpc_endpoint, [CONV])
            wait_for(lambda: len(daemon.query_json("SELECT id FROM scores")) >= 3, 30, interval_s=0.1, what="3 scores")
            yield daemon
        finally:
            assert daemon.stop() == 0, daemon.log()


def test_start_up_line_lists_the_bound_scorers(judged):
    assert (
        "2 scorer(s) bound: non-empty (non_empty_response, run, sampling 1), "
        "conversation-judge (multi_turn_judge, conversation, judge, sampling 1)"
    ) in judged.log()


def test_formats_json_array_and_jsonl_lines(judged):
    sql = "SELECT scorer_id, score FROM scores ORDER BY scorer_id, run_id"
    array = json.loads(judged.cli("query", sql, "--format", "json").stdout)
    assert [r["scorer_id"] for r in array] == ["conversation-judge", "non-empty", "non-empty"]
    lines = judged.cli("query", sql, "--format", "jsonl").stdout.splitlines()
    assert [json.loads(line) for line in lines] == array
    assert json.loads(judged.cli("query", "SELECT 1 AS x WHERE false", "--format", "json").stdout) == []
    scores = json.loads(judged.cli("scores", "--format", "json").stdout)
    assert len(scores) == 3 and {"id", "reason", "judge_model"} <= set(scores[0])
    runs = json.loads(judged.cli("runs", "--format", "json").stdout)
    jsonl = [json.loads(line) for line in judged.cli("runs", "--format", "jsonl").stdout.splitlines()]
    assert runs == jsonl and len(runs) == 2 and runs[0]["conversation_id"] == "conv-first-hour"


def test_tables_fit_120_columns_and_reasons_keep_their_tags(judged):
    for args in (["runs"], ["scores"], ["query", "SELECT * FROM runs"], ["query", "SELECT * FROM scores"]):
        out = judged.cli(*args).stdout
        assert max(len(line) for line in out.splitlines()) <= 120, (args, out)
    scores = judged.cli("scores").stdout
    assert " ".join(scores.split()).count(TAG) == 1  # wrapped over lines, not cut
    wide = judged.cli("runs", "--wide").stdout
    assert "convention" in wide.splitlines()[0] and max(len(line) for line in wide.splitlines()) > 120
    hidden = " ".join(judged.cli("query", "SELECT * FROM spans").stdout.split())
    assert "more column(s) not shown" in hidden and "--wide shows all" in hidden


def test_explain_scored_and_unknown_ids(judged):
    trace = judged.query_json("SELECT trace_id FROM runs ORDER BY started_at_unix_nano LIMIT 1")[0]["trace_id"]
    out = judged.cli("explain", trace)
    assert out.returncode == 0 and "non-empty: scored 1.0 label=pass (live)" in out.stdout
    assert "conversation-judge: scored 1.0 label=pass" in out.stdout and TAG in out.stdout
    for args, message in (
        (["explain", "0" * 32], f"unknown trace id {'0' * 32}"),
        (["explain", "--conversation", "nope"], "unknown conversation id 'nope'"),
    ):
        bad = judged.cli(*args, check=False)
        assert bad.returncode == 1 and message in bad.stderr and bad.stdout == ""


def test_explain_says_when_pending_targets_are_due(tmp_path):
    cfg = config_dict(
        tmp_path,
        assembly={"idle_s": 0.1, "conversation_idle_s": 600},
        workers=IN_PROCESS,
        scorers=[{"id": "conversation-check", "prebuilt": "non_empty_response", "scope": "conversation"}],
    )
    daemon = DaemonProcess(tmp_path, cfg).start()
    try:
        emit_conversations(
            daemon.grpc_endpoint, [{"id": "conv-pending", "agent": "a", "turns": [("Hi?", None, None, None, "Hello.")]}]
        )
        wait_for(lambda: daemon.runs(conversation_id="conv-pending"), 20, interval_s=0.1, what="the run")
        out = daemon.cli("explain", "--conversation", "conv-pending").stdout
        assert (
            "conversation-check: no decision yet — pending: the conversation is scored once idle for "
            "assembly.conversation_idle_s=600s" in out
        )
        assert "due in 10m" in out or "due in 9m" in out
    finally:
        assert daemon.stop() == 0, daemon.log()


def test_scorers_list_available_lists_every_prebuilt_with_options(tmp_path):
    from tracescorer.runner.bindings import PREBUILT

    out = tracescorer("scorers", "list", "--available", cwd=tmp_path, env={"COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines()[2:] if line and not line.startswith((" ", "("))}
    assert set(rows) == set(PREBUILT)
    assert "llm judge" in rows["multi_turn_judge"] and "criterion (required)" in rows["multi_turn_judge"]
    assert "code" in rows["includes"] and "text (required)" in rows["includes"]
    bound = tracescorer("scorers", "list", cwd=tmp_path)
    assert bound.returncode == 0 and "--available" in bound.stdout


# --- read commands while a daemon runs --------------------------------------------------------------------


def test_read_commands_never_open_a_file_a_live_daemon_holds(tmp_path):
    """A state file naming a live process whose ops API does not answer: a clear error, and the
    (readable) file is not used instead."""
    cfg = write_config(tmp_path, config_dict(tmp_path))
    db = tmp_path / "ts.duckdb"
    duckdb.connect(str(db)).execute("CREATE TABLE spans (trace_id VARCHAR)").close()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    write_serve_info(str(db), ServeInfo(pid=os.getpid(), url="", api_url=f"http://127.0.0.1:{port}", api_token="t"))
    out = tracescorer("query", "SELECT count(*) AS n FROM spans", "--config", str(cfg))
    assert out.returncode == 1 and out.stdout == ""
    assert f"the daemon (pid {os.getpid()}" in out.stderr and "does not answer" in out.stderr
    assert "If it is starting or busy, try again" in out.stderr


def test_a_file_locked_without_a_state_file_is_explained(tmp_path):
    cfg = write_config(tmp_path, config_dict(tmp_path))
    holder = duckdb.connect(str(tmp_path / "ts.duckdb"))  # this process holds the write lock
    try:
        out = tracescorer("query", "SELECT 1", "--config", str(cfg))
    finally:
        holder.close()
    assert out.returncode == 1
    assert "is locked by another process and no running tracescorer daemon is registered for it" in out.stderr
