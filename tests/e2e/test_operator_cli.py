"""An operator's read commands at work, through real CLI processes against a real daemon (OTel SDK
traffic, the fake judge over HTTP): ids that carry from one command to the next (whole or as
prefixes, ambiguous ones refused with the candidates), `scores` filters and the newest kept by
--limit, a narrow terminal that keeps the reason, one time format and no NULL, csv wherever json
is accepted, and backfills of the errors only or of the missing scores only."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from fakes.fake_openai import FakeOpenAI, Reply
from support.daemon import DaemonProcess, config_dict, wait_for

from tracescorer.demo import emit_conversations

CRITERION = "The agent answered every question"
CONVERSATIONS = [
    {
        "id": "conv-alpha",
        "agent": "support-alpha",
        "turns": [
            ("Where is my order 7?", "track_order", {"order": 7}, "in transit", "Order 7 is in transit."),
            ("Thanks!", None, None, None, "You're welcome, MARK-OK."),
        ],
    },
    {"id": "conv-beta", "agent": "support-beta", "turns": [("Refund?", None, None, None, "Refunded, MARK-ERR.")]},
    {"id": "conv-gamma", "agent": "billing-gamma", "turns": [("Invoice?", None, None, None, "No idea, MARK-FAIL.")]},
    {"id": "conv-empty", "agent": "support-alpha", "turns": [("Hello?", None, None, None, "")]},
]
BINDINGS = [
    {"id": "non-empty", "prebuilt": "non_empty_response", "scope": "run", "threshold": 1},
    {
        "id": "conversation-judge",
        "prebuilt": "multi_turn_judge",
        "scope": "conversation",
        "threshold": 1,
        "options": {"criterion": CRITERION},
    },
]
# the stages in the daemon's own process: these tests read what was scored, and worker processes
# (each importing the judge's client at start) would triple a daemon's start; tests/e2e/test_workers*.py
# run them
IN_PROCESS = {"count": 0}
STAMP = re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\b")
ANY_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d)?(\.\d+)?(Z|[+-]\d\d:\d\d| UTC)?")


@pytest.fixture(scope="module")
def fake():
    with FakeOpenAI() as server:
        server.script("Criterion:", Reply.json({"satisfied": True, "reasoning": "every question answered"}))
        server.script("MARK-FAIL", Reply.json({"satisfied": False, "reasoning": "the invoice question was dodged"}))
        server.script("MARK-ERR", Reply.error(400, "the judge refused this one"))
        yield server


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, fake):
    tmp = tmp_path_factory.mktemp("operator")
    cfg = config_dict(
        tmp,
        assembly={"idle_s": 0.1, "conversation_idle_s": 0.3},
        judge={"model": "openai/gpt-4o-mini", "api_base": fake.base_url, "api_key": "k", "timeout_s": 10},
        scorers=BINDINGS,
        workers=IN_PROCESS,
    )
    proc = DaemonProcess(tmp, cfg).start()
    try:
        emit_conversations(proc.grpc_endpoint, CONVERSATIONS)
        # 5 runs x non-empty + 4 conversations x judge
        wait_for(lambda: len(proc.query_json("SELECT id FROM scores")) >= 9, 60, 0.2, "9 scores")
        yield proc
    finally:
        assert proc.stop() == 0, proc.log()


def _table(out: str) -> list[dict[str, str]]:
    """The rows of a table the CLI printed (columns split on the dashes under the header)."""
    lines = out.splitlines()
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", lines[1])]
    names = [lines[0][a:b].strip() for a, b in spans]
    rows = []
    for line in lines[2:]:
        if line.startswith(("(", " ")):
            continue
        rows.append(
            {
                n: line[a : (spans[i + 1][0] if i + 1 < len(spans) else None)].strip()
                for i, (n, (a, _)) in enumerate(zip(names, spans, strict=True))
            }
        )
    return rows


def test_ids_shown_by_one_command_are_taken_by_the_next(daemon):
    runs = _table(daemon.cli("runs").stdout)
    assert len(runs) == 5 and {"run", "trace", "conversation"} <= set(runs[0])
    alpha = next(r for r in runs if r["conversation"] == "conv-alpha")
    full = daemon.query_json(f"SELECT run_id, trace_id FROM runs WHERE starts_with(run_id, '{alpha['run']}')")[0]
    assert len(alpha["run"]) == 12 and full["trace_id"].startswith(alpha["trace"])

    # a trace prefix, a run prefix, a whole run id, a conversation prefix: each is explained
    by_trace = daemon.cli("explain", alpha["trace"]).stdout
    assert f"trace {full['trace_id']}" in by_trace and "non-empty: scored 1.0 label=pass" in by_trace
    by_run = daemon.cli("explain", alpha["run"]).stdout
    assert by_run.startswith(f"run {full['run_id']}\ntrace {full['trace_id']}")
    assert daemon.cli("explain", full["run_id"]).stdout == by_run
    assert "conversation conv-alpha: 2 run(s)" in daemon.cli("explain", "conv-al").stdout

    # the scores table's target column names ids explain and runs take back
    scores = _table(daemon.cli("scores", alpha["trace"]).stdout)
    targets = {r["target"] for r in scores}
    assert targets == {f"run {alpha['run']}", "conv conv-alpha"}, scores
    assert "conversation conv-alpha" in daemon.cli("explain", "conv-alpha").stdout
    assert len(_table(daemon.cli("runs", "conv-alpha").stdout)) == 2
    assert [r["run"] for r in _table(daemon.cli("runs", alpha["run"]).stdout)] == [alpha["run"]]

    # a score id (or its prefix) stands for what it scored
    score = daemon.query_json(
        "SELECT id FROM scores WHERE scorer_id = 'conversation-judge' AND conversation_id = 'conv-gamma'"
    )[0]["id"]
    assert "conversation conv-gamma: 1 run(s)" in daemon.cli("explain", score[:10]).stdout
    assert _table(daemon.cli("runs", score[:10]).stdout)[0]["conversation"] == "conv-gamma"
    assert [r["target"] for r in _table(daemon.cli("scores", score).stdout)] == ["conv conv-gamma"]

    # an ambiguous prefix lists the candidates; an unknown id says nothing matched
    ambiguous = daemon.cli("explain", "conv-", check=False)
    assert ambiguous.returncode == 1 and "ambiguous id 'conv-'" in ambiguous.stderr
    assert "conversation conv-alpha" in ambiguous.stderr and "give more characters" in ambiguous.stderr
    unknown = daemon.cli("runs", "--trace", "ffffzz", check=False)
    assert unknown.returncode == 1 and "unknown trace id 'ffffzz'" in unknown.stderr


def test_scores_filters_and_the_newest_kept_by_limit(daemon):
    everything = json.loads(daemon.cli("scores", "--format", "json").stdout)
    assert len(everything) == 9
    stamps = [row["updated_at"] for row in everything]
    assert stamps == sorted(stamps)  # newest last
    newest = json.loads(daemon.cli("scores", "--format", "json", "--limit", "3").stdout)
    assert [r["id"] for r in newest] == [r["id"] for r in everything[-3:]]
    limited = daemon.cli("scores", "--limit", "3")
    assert "the newest 3 shown" in limited.stderr and len(_table(limited.stdout)) == 3

    fails = _table(daemon.cli("scores", "--label", "fail").stdout)
    assert {(r["scorer"], r["target"]) for r in fails} >= {("conversation-judge", "conv conv-gamma")}
    assert all(r["verdict"] == "fail" for r in fails) and len(fails) == 3  # gamma, empty (judge), empty (non-empty)
    errors = _table(daemon.cli("scores", "--status", "error").stdout)
    assert [(r["scorer"], r["target"], r["verdict"]) for r in errors] == [
        ("conversation-judge", "conv conv-beta", "error")
    ]
    judged = _table(daemon.cli("scores", "--scorer", "conversation-judge", "--agent", "support-*").stdout)
    assert sorted(r["target"] for r in judged) == ["conv conv-alpha", "conv conv-beta", "conv conv-empty"]
    assert (
        _table(daemon.cli("scores", "--agent", "billing-gamma", "--scorer", "non-empty").stdout)[0]["verdict"] == "pass"
    )


def test_a_narrow_terminal_keeps_the_reason_without_the_criterion(daemon):
    narrow = daemon.cli("scores", "--scorer", "conversation-judge", env={"COLUMNS": "80"})
    lines = narrow.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, narrow.stdout
    text = " ".join(narrow.stdout.split())
    assert "reason: Not satisfied: the invoice question was dodged" in text
    assert "reason: Satisfied: every question answered" in text
    assert CRITERION not in narrow.stdout  # said once, on stderr
    assert f"# conversation-judge judges the criterion: {CRITERION}" in narrow.stderr
    assert "the judge refused this one" in text  # the error's message stands in the reason's place
    full = json.loads(daemon.cli("scores", "--scorer", "conversation-judge", "--format", "json").stdout)
    assert any(CRITERION in (r["reason"] or "") for r in full)  # stored and exported in full
    wide = daemon.cli("scores", env={"COLUMNS": "160"}).stdout
    assert "reason" in wide.splitlines()[0]  # wide enough: the reason is a column again


def test_one_time_format_no_null_and_csv_wherever_json(daemon):
    trace = daemon.query_json("SELECT trace_id FROM runs ORDER BY started_at_unix_nano LIMIT 1")[0]["trace_id"]
    outputs = {
        "runs": daemon.cli("runs").stdout,
        "scores": daemon.cli("scores").stdout,
        "explain": daemon.cli("explain", trace).stdout,
        "query": daemon.cli("query", "SELECT updated_at, exported_at, label FROM scores ORDER BY id").stdout,
        "unmatched": daemon.cli("runs", "--unmatched").stdout,
        "report": daemon.cli("report", "--output", str(daemon.tmp_path / "r.html")).stdout,
    }
    for name, out in outputs.items():
        assert "NULL" not in out, (name, out)
        for found in ANY_TIME.finditer(out):
            assert STAMP.fullmatch(found.group(0)), (name, found.group(0), out)
    assert STAMP.search(outputs["query"]) and STAMP.search(outputs["runs"]) and STAMP.search(outputs["scores"])
    rows = list(csv.DictReader(io.StringIO(daemon.cli("runs", "--format", "csv").stdout)))
    assert len(rows) == 5 and {"run_id", "trace_id", "conversation_id", "output", "tool_calls"} <= set(rows[0])
    assert json.loads(next(r for r in rows if r["conversation_id"] == "conv-alpha")["tool_calls"] or "[]") is not None
    scores = list(csv.DictReader(io.StringIO(daemon.cli("scores", "--format", "csv").stdout)))
    assert len(scores) == 9 and "target_ended_at" in scores[0]
    monitors = daemon.cli("monitors", "--format", "csv")
    assert monitors.returncode == 0


def test_backfill_of_the_errors_rescores_only_them(daemon, fake):
    before = {r["id"]: r for r in daemon.query_json("SELECT id, updated_at, status FROM scores")}
    fake.script("MARK-ERR", Reply.json({"satisfied": True, "reasoning": "refund confirmed"}))  # the judge is back
    dry = daemon.cli("backfill", "--scorer", "conversation-judge", "--status", "error", "--dry-run").stdout
    assert "dry run — would 1/1 target(s): would_score: 1" in dry
    out = daemon.cli("backfill", "--scorer", "conversation-judge", "--status", "error").stdout
    assert "backfill done — 1/1 target(s): scored: 1" in out
    after = {r["id"]: r for r in daemon.query_json("SELECT id, updated_at, status, conversation_id FROM scores")}
    changed = [i for i in after if after[i]["updated_at"] != before[i]["updated_at"]]
    assert [after[i]["conversation_id"] for i in changed] == ["conv-beta"] and after[changed[0]]["status"] == "ok"
    nothing = daemon.cli("backfill", "--scorer", "conversation-judge", "--status", "error").stdout
    assert "0/0 target(s): nothing to do" in nothing
    # ids name the targets: a trace prefix stands for its run (run scope) or its conversation
    trace = daemon.query_json("SELECT trace_id FROM runs WHERE conversation_id = 'conv-gamma'")[0]["trace_id"]
    assert "1/1 target(s): scored: 1" in daemon.cli("backfill", "--scorer", "non-empty", trace[:12]).stdout
    assert "1/1 target(s): scored: 1" in daemon.cli("backfill", "--scorer", "conversation-judge", trace[:12]).stdout
    both = daemon.cli("backfill", "--scorer", "non-empty", "--status", "error", "--missing", check=False)
    assert both.returncode == 2 and "exclude each other" in both.stderr
    timed = daemon.cli("backfill", "--scorer", "non-empty", trace[:12], "--since", "1d", check=False)
    assert timed.returncode == 2 and "IDs name the targets" in timed.stderr


def test_backfill_of_the_missing_scores_only(tmp_path):
    """A scorer bound after traffic was scored: --missing scores only the runs it never saw, live
    and offline (no daemon) alike."""
    first = config_dict(
        tmp_path,
        assembly={"idle_s": 0.1},
        scorers=[BINDINGS[0]],
        scoring={"recover_window_s": 0},
        workers=IN_PROCESS,
    )
    daemon = DaemonProcess(tmp_path, first).start()
    try:
        emit_conversations(daemon.grpc_endpoint, CONVERSATIONS[:2])  # 3 runs
        wait_for(lambda: len(daemon.query_json("SELECT id FROM scores")) >= 3, 30, 0.2, "3 scores")
    finally:
        assert daemon.stop() == 0, daemon.log()
    added = {"id": "mentions-order", "prebuilt": "includes", "options": {"text": "order"}, "threshold": 1}
    second = config_dict(
        tmp_path,
        assembly={"idle_s": 0.1},
        scorers=[BINDINGS[0], added],
        scoring={"recover_window_s": 0},
        workers=IN_PROCESS,
    )
    daemon = DaemonProcess(tmp_path, second).start()
    try:
        emit_conversations(daemon.grpc_endpoint, CONVERSATIONS[2:3])  # 1 run, scored live by both
        query = "SELECT id, updated_at FROM scores WHERE scorer_id = 'mentions-order'"
        live = wait_for(lambda: daemon.query_json(query), 30, 0.2, "the live score")
        out = daemon.cli("backfill", "--scorer", "mentions-order", "--missing").stdout
        assert "backfill done — 3/3 target(s): scored: 3" in out
        scores = daemon.query_json(query)
        assert len(scores) == 4 and live[0] in scores  # the live score was left as it was
        again = daemon.cli("backfill", "--scorer", "mentions-order", "--missing").stdout
        assert "0/0 target(s): nothing to do" in again
    finally:
        assert daemon.stop() == 0, daemon.log()
    offline = daemon.cli("backfill", "--scorer", "non-empty", "--missing").stdout
    assert "0/0 target(s): nothing to do" in offline
