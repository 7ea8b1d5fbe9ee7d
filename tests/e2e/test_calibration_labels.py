"""Human labels through the real paths and what comes out of them: `tracescorer label` (through the
running daemon and on the file when none runs), the ops API's POST route with its token, a
CSV import of a `label-queue` file, then `agreement`, `disagreements` and the report's section."""

from __future__ import annotations

import csv
import json
import urllib.error
import urllib.request

import pytest
from fakes.fake_openai import FakeOpenAI, Reply
from support.daemon import DaemonProcess, config_dict, wait_for

from tracescorer.demo import emit_conversations

JUDGE = "answers-judge"


def _conversation(i: int, answer: str) -> dict:
    return {"id": f"conv-{i}", "agent": "support", "turns": [(f"Question {i}?", None, None, None, answer)]}


# the judge passes answers that say GOOD and fails the others
CONVERSATIONS = [_conversation(i, f"Answer {i}: {'GOOD' if i % 3 else 'BAD'} reply.") for i in range(1, 10)]


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        server.script("GOOD", Reply.json({"satisfied": True, "reasoning": "it answers"}))
        server.script("BAD", Reply.json({"satisfied": False, "reasoning": "it does not answer"}))
        yield server


def _config(tmp_path, fake) -> dict:
    return config_dict(
        tmp_path,
        assembly={"idle_s": 0.1, "conversation_idle_s": 0.3},
        # the stages in the daemon's own process: worker processes (each importing the judge's
        # client at start) would triple its start; tests/e2e/test_workers*.py run them
        workers={"count": 0},
        judge={"model": "openai/gpt-4o-mini", "api_base": fake.base_url, "api_key": "k", "timeout_s": 10},
        scorers=[
            {
                "id": JUDGE,
                "prebuilt": "multi_turn_judge",
                "scope": "conversation",
                "options": {"criterion": "The agent answered"},
                "threshold": 1,
            },
            {"id": "non-empty", "prebuilt": "non_empty_response", "scope": "run", "threshold": 1},
        ],
    )


def _post(daemon: DaemonProcess, body: dict, token: str | None = "daemon") -> tuple[int, dict]:
    assert daemon.info is not None
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {daemon.info.api_token if token == 'daemon' else token}"
    req = urllib.request.Request(
        daemon.info.api_url + "/api/v1/labels", data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_labels_in_through_cli_api_and_import_then_agreement_and_disagreements(tmp_path, fake):
    daemon = DaemonProcess(tmp_path, _config(tmp_path, fake)).start()
    try:
        emit_conversations(daemon.grpc_endpoint, CONVERSATIONS, service_name="support-svc")
        wait_for(
            lambda: len(daemon.query_json(f"SELECT id FROM scores WHERE scorer_id = '{JUDGE}'")) == 9,
            60,
            interval_s=0.25,
            what="9 judged conversations",
        )
        runs = {r["conversation_id"]: r for r in daemon.query_json("SELECT * FROM runs")}
        versions = {r["scorer_version"] for r in daemon.query_json("SELECT scorer_version FROM scores")}
        assert len(versions) == 2 and all(v and len(v) == 12 for v in versions)  # one per binding

        # CLI, through the running daemon: a conversation, and a trace that names its conversation
        out = daemon.cli("label", "conversation:conv-1", "--scorer", JUDGE, "--value", "pass", "--by", "ann").stdout
        assert "labelled conversation:conv-1 for answers-judge: pass (by ann)" in out
        trace2 = runs["conv-2"]["trace_id"]
        daemon.cli("label", trace2, "--scorer", JUDGE, "--value", "fail", "--by", "ann", "--note", "too vague")
        bad = daemon.cli("label", "conversation:nope", "--scorer", JUDGE, "--value", "pass", check=False)
        assert bad.returncode != 0 and "no stored run has this conversation id" in bad.stderr

        # the judge passed conv-2 and conv-4 and failed conv-6; ann disagrees with all three (the
        # last two through the ops API, as a review tool sends them)
        status, answer = _post(
            daemon,
            {
                "labels": [
                    {"target": "conversation:conv-4", "scorer": JUDGE, "value": "fail", "by": "ann"},
                    {"target": "conversation:conv-6", "scorer": JUDGE, "value": "pass", "by": "ann"},
                ]
            },
        )
        assert status == 200 and answer["written"] == 2, answer
        # the ops API: the daemon's token only; all or nothing, errors name the item
        assert (
            _post(daemon, {"labels": [{"target": "conv-3", "scorer": JUDGE, "value": "pass", "by": "bob"}]}, None)[0]
            == 401
        )
        assert _post(daemon, {"labels": []}, "wrong-token")[0] == 401
        status, answer = _post(
            daemon,
            {
                "labels": [
                    {"target": "conversation:conv-3", "scorer": JUDGE, "value": "pass", "by": "bob"},
                    {"target": "run:nope", "scorer": JUDGE, "value": "pass", "by": "bob"},
                ]
            },
        )
        assert status == 400 and answer["error"].startswith("labels[1]: target 'run:nope'")
        status, answer = _post(
            daemon,
            {
                "labels": [
                    {"target": "conversation:conv-3", "scorer": JUDGE, "value": "pass", "by": "bob"},
                    {"target": f"trace:{runs['conv-5']['trace_id']}", "scorer": "non-empty", "value": 1, "by": "bob"},
                    {"target": "conv-7", "scorer": "other-tool", "value": "relevant", "by": "bob"},
                ]
            },
        )
        assert status == 200, answer
        assert answer["written"] == 3 and answer["unbound"] == ["other-tool"]
        assert [a["target"] for a in answer["labels"]] == [
            "conversation:conv-3",
            f"run:{runs['conv-5']['run_id']}",
            "conversation:conv-7",
        ]
        # a newer label from the same person replaces the older one
        status, answer = _post(
            daemon, {"labels": [{"target": "conv-3", "scorer": JUDGE, "value": "fail", "by": "bob"}]}
        )
        assert status == 200 and answer["written"] == 1
        labels = daemon.query_json(f"SELECT author, target_id, label, source FROM labels WHERE scorer_id = '{JUDGE}'")
        assert sorted((r["author"], r["target_id"], r["label"]) for r in labels) == [
            ("ann", "conv-1", "pass"),
            ("ann", "conv-2", "fail"),
            ("ann", "conv-4", "fail"),
            ("ann", "conv-6", "pass"),
            ("bob", "conv-3", "fail"),
        ]
        assert {r["source"] for r in labels} == {"cli", "api"}

        # the queue: unlabelled targets, written as a file a reviewer fills in and imports
        queue_file = tmp_path / "queue.csv"
        out = daemon.cli("label-queue", "--scorer", JUDGE, "-n", "3", "-o", str(queue_file))
        assert "picked 3 of 4 unlabelled target(s)" in out.stderr
        with open(queue_file, newline="") as fh:
            queued = list(csv.DictReader(fh))
        assert len(queued) == 3 and {q["target"] for q in queued} <= {f"conversation:conv-{i}" for i in (5, 7, 8, 9)}
        assert all(q["value"] == "" and q["judge_label"] in ("pass", "fail") and q["excerpt"] for q in queued)
        # the reviewer fills in two rows (agreeing with the judge) and leaves one blank
        for q in queued[:2]:
            q["value"], q["by"] = q["judge_label"], "carol"
        with open(queue_file, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(queued[0]))
            writer.writeheader()
            writer.writerows(queued)
        out = daemon.cli("label", "--import", str(queue_file))
        assert "imported 2 label(s)" in out.stdout and "1 left blank" in out.stdout

        # agreement: 7 labelled conversations, the judge and the people agree on 4
        result = json.loads(daemon.cli("agreement", "--scorer", JUDGE, "--format", "json").stdout)
        (row,) = result
        assert row["judge"] == JUDGE and row["reference"] == "labels" and row["pairs"] == 7
        judged = {
            r["conversation_id"]: r for r in daemon.query_json(f"SELECT * FROM scores WHERE scorer_id = '{JUDGE}'")
        }
        assert judged["conv-4"]["label"] == "pass" and judged["conv-6"]["label"] == "fail"
        assert row["accuracy"] == pytest.approx(4 / 7)
        assert row["confusion"]["fail"]["pass"] == 2 and row["confusion"]["pass"]["fail"] == 1
        assert row["kappa_ci"] is not None and row["suggested_threshold"]["value"] in (0.0, 1.0)
        text = daemon.cli("agreement", "--scorer", JUDGE).stdout
        assert "vs labels: 7 target(s) with both" in text and "kappa" in text and "confusion" in text

        # the gauges follow the labels within seconds of the last one stored
        version = judged["conv-4"]["scorer_version"]
        series = f'reference="labels",scorer="{JUDGE}",version="{version}"'

        def gauges() -> str | None:
            text = urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10).read().decode()
            return text if f"tracescorer_agreement_pairs{{{series}}} 7.0" in text else None

        metrics = wait_for(gauges, 30, interval_s=0.5, what="agreement gauges with 7 pairs")
        accuracy = next(
            line for line in metrics.splitlines() if line.startswith(f"tracescorer_agreement_accuracy{{{series}}}")
        )
        assert float(accuracy.rsplit(" ", 1)[1]) == pytest.approx(4 / 7)
        assert f"tracescorer_agreement_kappa{{{series}}}" in metrics

        report = tmp_path / "report.html"
        daemon.cli("report", "--since", "1h", "--output", str(report))
        html = report.read_text()
        section = html[html.index('id="calibration"') :]
        assert "Judge calibration" in section and f"<td>{JUDGE}</td>" in section
        assert f'<span class="ids">{version}</span></td><td>7</td><td>0.571' in section  # pairs, accuracy
        assert "rows labels, columns judge" in section and f'data-versions="{JUDGE}"' in section

        out = daemon.cli("disagreements", "--scorer", JUDGE)
        assert "conversation:conv-4" in out.stdout and "conversation:conv-6" in out.stdout
        assert "judge pass, reference fail" in out.stdout and "judge's reason:" in out.stdout
        assert "excerpt: user: Question 4? / assistant: Answer 4: GOOD reply." in out.stdout
        assert "note: too vague" in out.stdout and "labelled by: ann" in out.stdout
        assert "3 disagreement(s) among 7 target(s)" in out.stderr
    finally:
        assert daemon.stop() == 0, daemon.log()

    # no daemon: the CLI writes the store itself, and reads it for agreement
    blank = queued[2]["target"]  # the row the reviewer left blank
    out = daemon.cli("label", blank, "--scorer", JUDGE, "--value", "pass", "--by", "dan").stdout
    assert f"labelled {blank}" in out
    result = json.loads(daemon.cli("agreement", "--scorer", JUDGE, "--format", "json", "--resamples", "0").stdout)
    assert result[0]["pairs"] == 8 and result[0]["kappa_ci"] is None
