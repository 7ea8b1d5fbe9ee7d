"""A changed prompt is a new scorer version: the daemon scores with a user scorer, its prompt is
edited and the daemon restarted; every score carries the version that made it, and the report's
trend and `agreement` are split by version."""

from __future__ import annotations

import json
import os
import textwrap

from fakes.fake_openai import FakeOpenAI, Reply
from support.daemon import DaemonProcess, config_dict, wait_for

from tracescorer.demo import emit_conversations

SCORER = """
from tracescorer import PromptStep, create_scorer

PROMPT = {prompt!r}


def _ask(*, run, results):
    answer = " ".join(m.content for m in run.output)
    return f"{{PROMPT}}\\nAnswer: {{answer}}\\nReply with a JSON score from 0 to 1."


def make():
    return create_scorer(id="politeness", description="polite answers", type="agent").generate_score(
        PromptStep(description="ask the judge", create_prompt=_ask)
    )
"""


def _conversations(first: int, n: int) -> list[dict]:
    return [
        {"id": f"conv-{i}", "agent": "support", "turns": [(f"Question {i}?", None, None, None, f"Answer {i}, thanks!")]}
        for i in range(first, first + n)
    ]


def _write_scorer(tmp_path, prompt: str) -> None:
    (tmp_path / "user_scorers.py").write_text(textwrap.dedent(SCORER.format(prompt=prompt)))


def test_a_changed_prompt_gives_a_new_version_and_splits_the_trend_and_agreement(tmp_path):
    with FakeOpenAI() as fake:
        fake.script("Is the answer polite?", Reply.json({"score": 1}))
        fake.script("Is the answer courteous and warm?", Reply.json({"score": 0.5}))
        cfg = config_dict(
            tmp_path,
            assembly={"idle_s": 0.3},
            judge={"model": "openai/gpt-4o-mini", "api_base": fake.base_url, "api_key": "k", "timeout_s": 10},
            scorers=[{"id": "politeness", "python": "user_scorers:make", "threshold": 0.75}],
            workers={"count": 0},  # the version is the binding's, wherever it runs: fewer processes
        )
        env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
        _write_scorer(tmp_path, "Is the answer polite?")
        daemon = DaemonProcess(tmp_path, cfg, env=env).start()
        try:
            emit_conversations(daemon.grpc_endpoint, _conversations(1, 3))
            wait_for(lambda: len(daemon.query_json("SELECT id FROM scores")) == 3, 30, interval_s=0.2, what="3 scores")
        finally:
            assert daemon.stop() == 0, daemon.log()

        _write_scorer(tmp_path, "Is the answer courteous and warm?")  # the prompt is edited
        daemon.start()
        try:
            emit_conversations(daemon.grpc_endpoint, _conversations(4, 3))
            rows = wait_for(
                lambda: (lambda r: r if len(r) == 6 else None)(
                    daemon.query_json(
                        "SELECT conversation_id, scorer_version, score FROM scores ORDER BY conversation_id"
                    )
                ),
                30,
                interval_s=0.2,
                what="6 scores",
            )
            old = {r["scorer_version"] for r in rows if r["conversation_id"] in ("conv-1", "conv-2", "conv-3")}
            new = {r["scorer_version"] for r in rows if r["conversation_id"] in ("conv-4", "conv-5", "conv-6")}
            assert len(old) == 1 and len(new) == 1 and old != new  # one version each, a new one after the edit
            (v1,), (v2,) = old, new
            assert {r["score"] for r in rows if r["scorer_version"] == v1} == {1.0}
            assert {r["score"] for r in rows if r["scorer_version"] == v2} == {0.5}

            scores = json.loads(daemon.cli("scores", "--format", "json").stdout)
            assert {s["scorer_version"] for s in scores} == {v1, v2}
            explain = daemon.cli("explain", "--conversation", "conv-5").stdout
            assert "politeness: scored 0.5 label=fail" in explain and f"(live), version {v2}" in explain

            report = tmp_path / "report.html"
            daemon.cli("report", "--since", "1h", "--output", str(report))
            section = report.read_text().split('id="calibration"', 1)[1]
            assert "politeness: 2 version(s)" in section
            assert section.index(
                f'<td class="ids">{v1}</td><td class="num">3</td><td class="num">1.000</td>'
            ) < section.index(f'<td class="ids">{v2}</td><td class="num">3</td><td class="num">0.500</td>')
            assert f"politeness version {v1}" in section and f"politeness version {v2}" in section  # a trend each

            # people agree with the old prompt's verdicts and not with the new one's
            labels = tmp_path / "labels.jsonl"  # one command for the six labels
            labels.write_text(
                "".join(
                    json.dumps(
                        {"target": f"conversation:conv-{i}", "scorer": "politeness", "value": "pass", "by": "ann"}
                    )
                    + "\n"
                    for i in range(1, 7)
                )
            )
            daemon.cli("label", "--import", str(labels))
            rows = json.loads(daemon.cli("agreement", "--scorer", "politeness", "--format", "json").stdout)
            by = {r["version"]: r for r in rows}
            assert set(by) == {v1, v2, "all"}
            assert (by[v1]["pairs"], by[v1]["accuracy"]) == (3, 1.0)
            assert (by[v2]["pairs"], by[v2]["accuracy"]) == (3, 0.0)
            assert by["all"]["pairs"] == 6 and by["all"]["accuracy"] == 0.5
            single = json.loads(
                daemon.cli("agreement", "--scorer", "politeness", "--all-versions", "--format", "json").stdout
            )
            assert [r["version"] for r in single] == ["all"]
        finally:
            assert daemon.stop() == 0, daemon.log()
