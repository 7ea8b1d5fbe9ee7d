"""Several `tracescorer serve` processes on one real PostgreSQL: traces routed by trace id as the
Collector's loadbalancing exporter does, each conversation scored once, stored once, exported once,
also when a daemon is killed mid-load."""

from __future__ import annotations

import json
import signal
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fakes.fake_openai import FakeOpenAI, Reply
from fakes.otlp_capture import OtlpCapture
from support.daemon import DaemonProcess, config_dict, wait_for
from support.kept import wait_span_rows
from support.routing import Acked, RoutingExporter, SequentialTraceIds

from tracescorer.demo import emit_conversations

CONV = "conversation-split"


def _turns(n: int, tag: str) -> list[tuple[str, None, None, None, str]]:
    return [(f"{tag} question {i}?", None, None, None, f"{tag} answer {i}.") for i in range(n)]


def _config(
    root: Path,
    name: str,
    dsn: str,
    fake: FakeOpenAI,
    *,
    capture: OtlpCapture | None = None,
    lease_s: float = 3.0,
    judge_delay_s: float = 0.0,
) -> tuple[Path, dict[str, Any]]:
    home = root / name
    home.mkdir()
    cfg = config_dict(
        home,
        store={
            "backend": "postgres",
            "postgres": {"dsn": dsn, "claim_interval_s": 0.2, "claim_lease_s": lease_s},
            "spans": "all",  # a span row for every span: what the tests look acknowledged spans up in
        },
        assembly={"idle_s": 0.3, "conversation_idle_s": 1.5},
        judge={"model": "openai/gpt-4o-mini", "api_base": fake.base_url, "api_key": "k", "timeout_s": 30},
        scorers=[
            {
                "id": "conversation-judge",
                "prebuilt": "multi_turn_judge",
                "scope": "conversation",
                "options": {"criterion": "The agent answered every question"},
                "threshold": 1,
            },
            {"id": "non-empty", "prebuilt": "non_empty_response", "scope": "run"},
        ],
        shutdown={"grace_s": 10},
    )
    if capture is not None:
        cfg["export"] = {"enabled": True, "endpoint": capture.grpc_endpoint, "protocol": "grpc", "interval_s": 0.3}
    return home, cfg


def _start(daemons: list[DaemonProcess]) -> list[DaemonProcess]:
    """Start the daemons side by side; none is left running when one fails to start."""
    with ThreadPoolExecutor(len(daemons)) as pool:
        futures = [pool.submit(d.start) for d in daemons]
    failed = [f.exception() for f in futures if f.exception() is not None]
    if failed:
        for d in daemons:
            if d.proc is not None and d.proc.poll() is None:
                d.stop()
        raise failed[0]
    return daemons


def _metric(daemon: DaemonProcess, name: str) -> float:
    text = urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def _judge_calls(fake: FakeOpenAI, tag: str) -> int:
    return sum(1 for r in fake.requests if f"{tag} answer" in r.prompt_text)


@pytest.fixture
def fake():
    with FakeOpenAI(default=Reply.json({"satisfied": True, "reasoning": "every question answered"})) as server:
        yield server


def _with_monitor(home: Path, cfg: dict[str, Any], hook_url: str) -> tuple[Path, dict[str, Any]]:
    """``cfg`` with a run scorer every turn of the split conversation fails and a monitor of it
    that fires at 4 failing scores: two on each daemon, so only when they count together."""
    cfg["scorers"].append({"id": "mentions-ok", "prebuilt": "includes", "options": {"text": "OK"}, "threshold": 1})
    cfg["monitors"] = [
        {
            "id": "quality",
            "scorer": "mentions-ok",
            "aggregate": "pass_rate",
            "window": "1h",
            "below": 0.8,
            "min_samples": 4,
            "for": "0s",
            "cooldown": "1h",
            "notify": [{"webhook": hook_url, "retries": 0}],
        }
    ]
    return home, cfg


def test_a_conversation_split_across_two_daemons_is_scored_stored_and_exported_once(tmp_path, pg_dsn, fake):
    """Also: the monitors run on one daemon, counting every daemon's scores, and another daemon
    takes over from the stored state when it stops, without notifying again."""
    from fakes.webhook_receiver import WebhookReceiver

    with OtlpCapture() as capture, WebhookReceiver() as hooks:
        daemons = _start(
            [
                DaemonProcess(
                    *_with_monitor(*_config(tmp_path, n, pg_dsn, fake, capture=capture), hooks.url + "/quality")
                )
                for n in ("a", "b")
            ]
        )
        try:
            acked = Acked(2)
            exporter = RoutingExporter([d.grpc_endpoint for d in daemons], acked)
            # consecutive trace ids: the four turns alternate between the daemons
            emit_conversations(
                "",
                [{"id": CONV, "agent": "support", "turns": _turns(4, "split")}],
                exporter=exporter,
                id_generator=SequentialTraceIds(1000),
            )
            assert all(len(t) == 2 for t in acked.traces), acked.traces  # both daemons got turns
            a, b = daemons
            rows = wait_for(
                lambda: a.query_json("SELECT * FROM scores WHERE scorer_id = 'conversation-judge'") or None,
                60,
                interval_s=0.2,
                what="the conversation score",
            )
            state = wait_for(
                lambda: (lambda r: r if r and r[0]["delivered"] else None)(
                    a.query_json(
                        "SELECT count(*) FILTER (WHERE status = 'delivered') AS delivered, count(*) AS n FROM score_deliveries "
                        f"WHERE score_id = '{rows[0]['id']}'"
                    )
                ),
                30,
                interval_s=0.2,
                what="the score exported",
            )
            assert state == [{"delivered": 1, "n": 1}]
            # every daemon had its claim passes after the scoring: nothing is left due, nobody scored it again
            wait_for(
                lambda: (
                    b.query_json(
                        "SELECT count(*) AS n FROM conversation_activity WHERE "
                        "scored_seq = activity_seq AND claimed_by IS NULL"
                    )
                    == [{"n": 1}]
                ),
                30,
                interval_s=0.2,
                what="the conversation settled",
            )
            [row] = a.query_json("SELECT * FROM scores WHERE scorer_id = 'conversation-judge'")
            assert row["conversation_id"] == CONV and row["score"] == 1.0 and row["label"] == "pass"
            runs = a.query_json(f"SELECT run_id, assembled_by FROM runs WHERE conversation_id = '{CONV}'")
            assert len(runs) == 4 and len({r["assembled_by"] for r in runs}) == 2  # each daemon assembled some
            assert sorted(json.loads(row["metadata"])["run_ids"]) == sorted(r["run_id"] for r in runs)
            assert _judge_calls(fake, "split") == 1
            wait_for(  # the workers tell the daemons their metrics every few seconds
                lambda: (
                    sum(_metric(d, 'tracescorer_conversation_claims_total{outcome="claimed"}') for d in daemons) == 1
                ),
                30,
                interval_s=0.2,
                what="the claim counted",
            )
            evaluations = capture.spans_named("evaluate conversation-judge")
            assert len(evaluations) == 1  # exported once, by one of the daemons
            # run scope stays on the daemon that assembled the run: four run scores, one per run
            assert a.query_json("SELECT count(*) AS n FROM scores WHERE scorer_id = 'non-empty'") == [{"n": 4}]
            # read commands: shared tables through either daemon, the span log per daemon, and they say so
            out = b.cli("query", "SELECT count(*) AS spans FROM spans")
            assert "span log" in out.stderr
            for index, d in enumerate(daemons):  # each daemon's span rows, once
                wait_span_rows(d, acked, index, timeout_s=60)
            assert "conversation-judge" in b.cli("scores", "--scorer", "conversation-judge").stdout
            explain = a.cli("explain", "--conversation", CONV).stdout
            assert "conversation-judge: scored 1.0 label=pass" in explain
            other = next(iter(acked.traces[1]))  # a trace daemon b assembled, explained through daemon a
            assert "assembled by another daemon" in a.cli("explain", other).stdout

            # the monitor: 4 failing scores, two on each daemon, fire it once
            wait_for(lambda: len(hooks.at("/quality")) >= 1, 60, interval_s=0.2, what="the monitor firing")
            state = a.query_json("SELECT state, samples FROM monitor_state WHERE monitor_id = 'quality'")
            assert state == [{"state": "firing", "samples": 4}]
            leaders = [d for d in daemons if "this daemon runs the monitors" in d.log()]
            assert len(leaders) == 1
            # the leader stops: the other daemon takes over from the stored state, without a second notification
            assert leaders[0].stop() == 0, leaders[0].log()[-3000:]
            follower = next(d for d in daemons if d is not leaders[0])
            wait_for(lambda: "this daemon runs the monitors" in follower.log(), 30, interval_s=0.2, what="the takeover")
            firing = 'tracescorer_monitor_state{monitor="quality",state="firing"}'
            wait_for(
                lambda: _metric(follower, firing) == 1, 30, interval_s=0.2, what="the new leader evaluating: firing"
            )
            assert len(hooks.at("/quality")) == 1  # still firing, from the stored state: not notified again
        finally:
            codes = [d.stop() for d in daemons]
        assert codes == [0, 0], [d.log()[-3000:] for d in daemons]
        # no daemon running: the read commands go straight to PostgreSQL (and to the span log file)
        assert "conversation-judge" in daemons[0].cli("scores").stdout
        refused = daemons[0].cli("query", "DELETE FROM scores", check=False)
        assert refused.returncode != 0 and "only read statements" in refused.stderr


def test_kill_9_one_daemon_mid_load_every_conversation_scored_once_nothing_acknowledged_lost(tmp_path, pg_dsn, fake):
    fake.script("answer", Reply.json({"satisfied": True, "reasoning": "ok"}, delay_s=0.6))  # judges take a while
    daemons = _start([DaemonProcess(*_config(tmp_path, n, pg_dsn, fake)) for n in ("a", "b")])
    conversations = [{"id": f"load-{i}", "agent": "support", "turns": _turns(3, f"load{i}")} for i in range(10)]
    acked = Acked(2)
    try:
        for turn in range(3):  # every conversation's turn k, then k+1: turns of one conversation on both daemons
            emit_conversations(
                "",
                conversations,
                exporter=RoutingExporter([d.grpc_endpoint for d in daemons], acked, timeout_s=3),
                id_generator=SequentialTraceIds(10_000 * (turn + 1) + turn),  # turn k of conversation i: (i+k) % 2
                turns=slice(turn, turn + 1),
            )
        # kill a daemon while it scores (it holds claims, its judge calls in flight): whichever claims first
        claimed = 'tracescorer_conversation_claims_total{outcome="claimed"}'
        victim = wait_for(
            lambda: next((d for d in daemons if _metric(d, claimed) >= 1), None),
            60,
            interval_s=0.05,
            what="a daemon claiming conversations",
        )
        survivor = daemons[1 - daemons.index(victim)]
        assert victim.stop(signal.SIGKILL) == -signal.SIGKILL
        # its leases run out and the survivor takes the claims over (3 s lease)
        wait_for(
            lambda: (
                survivor.query_json(
                    "SELECT count(*) AS n FROM conversation_activity WHERE scored_seq IS NOT DISTINCT FROM activity_seq "
                    "AND claimed_by IS NULL"
                )
                == [{"n": 10}]
            ),
            90,
            interval_s=0.25,
            what="every conversation scored",
        )
        # (whether a claim was live at the kill is a race; that each conversation is scored once is not)
        # the victim comes back on its span log: what it acknowledged is there and assembled
        victim.start()
        victim.settled()  # its replay stored first: what it brings back is counted in the waits below
        wait_for(
            lambda: (
                survivor.query_json(
                    "SELECT count(*) AS n FROM conversation_activity WHERE scored_seq = activity_seq AND claimed_by IS NULL"
                )
                == [{"n": 10}]
            ),
            90,
            interval_s=0.25,
            what="every conversation settled after the restart",
        )
        want = [c["id"] for c in sorted(conversations, key=lambda c: c["id"])]

        def conversation_scores() -> list[dict[str, Any]] | None:
            scores = survivor.query_json(
                "SELECT conversation_id, metadata FROM scores WHERE scorer_id = 'conversation-judge' ORDER BY 1"
            )
            return scores if [s["conversation_id"] for s in scores] == want else None

        # a snapshot right after the settle could miss a row on a loaded machine (seen once): wait for it
        scores = wait_for(conversation_scores, 60, interval_s=0.25, what="a conversation score of each conversation")
        for score in scores:  # one row each, covering every stored turn
            runs = survivor.query_json(f"SELECT run_id FROM runs WHERE conversation_id = '{score['conversation_id']}'")
            assert sorted(json.loads(score["metadata"])["run_ids"]) == sorted(r["run_id"] for r in runs)
        decisions = survivor.query_json(
            "SELECT target_id, count(*) AS n FROM scoring_decisions WHERE scorer_id = 'conversation-judge' GROUP BY 1"
        )
        assert len(decisions) == 10 and {d["n"] for d in decisions} == {1}
        for index, d in enumerate(daemons):  # no acknowledged span lost on either daemon
            wait_span_rows(d, acked, index, timeout_s=60)
    finally:
        codes = [d.stop() for d in daemons if d.proc is not None and d.proc.poll() is None]
    assert all(c == 0 for c in codes), [d.log()[-3000:] for d in daemons]
