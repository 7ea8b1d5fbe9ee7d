"""Monitors and score metrics end to end: OTel SDK traffic -> `tracescorer serve` (code scorers) ->
monitor notifications to a real local webhook receiver, score metrics on /metrics, state shown by
`tracescorer monitors` and kept across a restart (a firing monitor stays firing without a repeat, a
pending one keeps counting from when its breach began). Series of scores against flapping,
cooldowns and reminders: test_monitors_series.py."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest
from fakes.webhook_receiver import WebhookReceiver
from prometheus_client.parser import text_string_to_metric_families
from support.daemon import DaemonProcess, config_dict, wait_for

from tracescorer.demo import emit_conversations

_seq = iter(range(1_000_000))


def _conversations(n: int, *, good: bool, agent: str = "support-alpha") -> list[dict[str, Any]]:
    answer = "OK, your order is on its way." if good else "Sorry, that did not work."
    return [
        {"id": f"conv-{next(_seq)}", "agent": agent, "turns": [("Where is my order?", None, None, None, answer)]}
        for _ in range(n)
    ]


def _metrics(daemon: DaemonProcess) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10).read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _value(daemon: DaemonProcess, name: str, **labels: str) -> float | None:
    return _metrics(daemon).get((name, frozenset(labels.items())))


def _wait_metric(daemon: DaemonProcess, name: str, expected: float, what: str, **labels: str) -> None:
    wait_for(
        lambda: _value(daemon, name, **labels) == expected,
        60,
        interval_s=0.1,
        what=f"{what} ({name}{labels} == {expected}, now {_value(daemon, name, **labels)})",
    )


def _config(tmp_path: Any, hooks: WebhookReceiver) -> dict[str, Any]:
    return config_dict(
        tmp_path,
        assembly={"idle_s": 0.05},
        store={"results_delay_s": 0},
        scorers=[
            {"id": "mentions-ok", "prebuilt": "includes", "options": {"text": "OK"}, "scope": "run", "threshold": 1},
            {"id": "non-empty", "prebuilt": "non_empty_response", "scope": "run", "threshold": 1},
        ],
        score_metrics={"max_agents": 1},
        # the daemon's own process scores: the monitors are in it either way, and scores told by
        # worker processes reach its listeners in test_workers.py (a step here takes ~5 s with them)
        workers={"count": 0},
        monitors=[
            {
                "id": "quality",
                "scorer": "mentions-*",
                "aggregate": "pass_rate",
                "window": "1h",
                "below": 0.8,
                "min_samples": 4,
                "for": "0s",
                "cooldown": "1h",
                "notify": [
                    {"webhook": hooks.url + "/quality", "retries": 0},
                    {"slack": hooks.url + "/slack", "retries": 0},
                ],
            },
            {
                "id": "first-score",
                "scorer": "non-empty",
                "aggregate": "count",
                "window": "1h",
                "above": 0,
                "for": "0s",
                "notify": [{"webhook": hooks.url + "/flaky", "retries": 3, "retry_initial_s": 0.1}],
            },
            {  # the same rule, an hour's pending period: pending for the whole test
                "id": "patient",
                "scorer": "mentions-*",
                "aggregate": "pass_rate",
                "window": "1h",
                "below": 0.8,
                "min_samples": 4,
                "for": "1h",
                "notify": [{"webhook": hooks.url + "/patient", "retries": 0}],
            },
        ],
    )


@pytest.fixture
def hooks():
    with WebhookReceiver() as receiver:
        yield receiver


def test_monitors_fire_once_resolve_respect_cooldown_and_survive_a_restart(tmp_path, hooks):
    hooks.fail("/flaky", 2, status=503)
    daemon = DaemonProcess(tmp_path, _config(tmp_path, hooks)).start()
    try:
        # 3 failing runs: below min_samples, no verdict yet
        emit_conversations(daemon.grpc_endpoint, _conversations(3, good=False))
        _wait_metric(daemon, "tracescorer_monitor_samples", 3, "3 scores in the window", monitor="quality")
        assert _value(daemon, "tracescorer_monitor_state", monitor="quality", state="ok") == 1
        # the count monitor fired on the first score; its webhook failed twice and was retried
        wait_for(lambda: [r.status for r in hooks.at("/flaky")] == [503, 503, 200], 30, what="webhook retried")
        assert hooks.at("/quality") == []

        # the 4th failure crosses the threshold: one notification per target
        emit_conversations(daemon.grpc_endpoint, _conversations(1, good=False, agent="billing-bot"))
        wait_for(lambda: hooks.at("/quality") and hooks.at("/slack"), 30, what="firing notification")
        body = hooks.at("/quality")[0].body
        assert (body["status"], body["monitor"], body["value"], body["window"], body["samples"]) == (
            "firing",
            "quality",
            0.0,
            "1h",
            4,
        )
        runs = {r["trace_id"]: r for r in daemon.query_json("SELECT trace_id, conversation_id FROM runs")}
        assert {e["trace_id"] for e in body["examples"]} <= set(runs) and len(body["examples"]) == 4
        assert all(e["conversation_id"] == runs[e["trace_id"]]["conversation_id"] for e in body["examples"])
        assert all("Failed" in e["reason"] for e in body["examples"])
        assert "[FIRING] quality" in hooks.at("/slack")[0].body["text"]

        # score metrics, with the agent label capped at one name
        m = _metrics(daemon)
        key = lambda name, **labels: (name, frozenset(labels.items()))  # noqa: E731
        assert (
            m[
                key(
                    "tracescorer_score_results_total",
                    scorer="mentions-ok",
                    agent="support-alpha",
                    label="fail",
                    status="ok",
                )
            ]
            == 3
        )
        assert (
            m[key("tracescorer_score_results_total", scorer="mentions-ok", agent="_other", label="fail", status="ok")]
            == 1
        )
        assert (
            m[
                key(
                    "tracescorer_score_results_total",
                    scorer="non-empty",
                    agent="support-alpha",
                    label="pass",
                    status="ok",
                )
            ]
            == 3
        )
        assert m[key("tracescorer_score_value_bucket", scorer="mentions-ok", agent="support-alpha", le="0.0")] == 3
        assert m[key("tracescorer_score_value_count", scorer="non-empty", agent="_other")] == 1
        assert m[key("tracescorer_score_value_sum", scorer="non-empty", agent="support-alpha")] == 3.0
        assert not any(dict(labels).get("agent") == "billing-bot" for _, labels in m)
        assert m[key("tracescorer_monitor_state", monitor="quality", state="firing")] == 1
        assert m[key("tracescorer_monitor_state", monitor="patient", state="pending")] == 1
        assert (
            m[key("tracescorer_monitor_notifications_total", monitor="first-score", channel="webhook", result="sent")]
            == 1
        )

        out = daemon.cli("monitors").stdout
        quality = next(line for line in out.splitlines() if line.startswith("quality"))
        assert "firing" in quality  # the table (its rule column wraps)
        listed = {m["monitor"]: m for m in json.loads(daemon.cli("monitors", "--format", "json").stdout)}
        assert listed["quality"]["rule"] == (
            "pass_rate(mentions-*) below 0.8 over 1h, min 4, cooldown 1h, repeat_interval 4h"
        )
        assert listed["quality"]["state"] == "firing" and listed["quality"]["last_message"] == "firing"
        patient = listed["patient"]
        assert patient["rule"].startswith("pass_rate(mentions-*) below 0.8 over 1h, min 4, for 1h, keep_firing_for 1h")
        assert patient["state"] == "pending" and patient["detail"].endswith("of for 1h")
        pending_since = patient["since"]
    finally:
        assert daemon.stop() == 0, daemon.log()

    # stopped: the state is read from the file
    offline = {m["monitor"]: m for m in json.loads(daemon.cli("monitors", "--format", "json").stdout)}
    assert offline["quality"]["state"] == "firing"
    assert offline["patient"]["state"] == "pending" and offline["patient"]["since"] == pending_since

    restarted_at = time.time()
    daemon.start()
    try:
        wait_for(
            lambda: (
                (_value(daemon, "tracescorer_monitor_last_evaluation_timestamp_seconds", monitor="quality") or 0)
                > restarted_at
            ),
            30,
            what="evaluated after the restart",
        )
        assert _value(daemon, "tracescorer_monitor_state", monitor="quality", state="firing") == 1
        assert _value(daemon, "tracescorer_monitor_state", monitor="patient", state="pending") == 1
        assert _value(daemon, "tracescorer_monitor_samples", monitor="quality") == 4  # rebuilt from the table
        listed = {m["monitor"]: m for m in json.loads(daemon.cli("monitors", "--format", "json").stdout)}
        assert listed["patient"]["since"] == pending_since  # still counting from when the breach began
        emit_conversations(daemon.grpc_endpoint, _conversations(1, good=False))
        _wait_metric(daemon, "tracescorer_monitor_samples", 5, "the 5th score", monitor="quality")
        assert len(hooks.at("/quality")) == 1  # still firing: no duplicate after the restart
        assert len(hooks.at("/flaky")) == 3  # the count monitor too

        # 20 passes: 20 of 25 = 0.8 is not below 0.8 -> resolved, and notified
        emit_conversations(daemon.grpc_endpoint, _conversations(20, good=True))
        wait_for(lambda: len(hooks.at("/quality")) == 2, 30, what="resolved notification")
        assert hooks.at("/quality")[1].body["status"] == "resolved"
        assert hooks.at("/quality")[1].body["value"] == 0.8

        # the pending monitor went back to ok without a word: it never fired
        assert _value(daemon, "tracescorer_monitor_state", monitor="patient", state="ok") == 1

        # failing again within the 1h cooldown: firing, held until the cooldown ends (not dropped)
        emit_conversations(daemon.grpc_endpoint, _conversations(10, good=False))
        _wait_metric(
            daemon,
            "tracescorer_monitor_notifications_total",
            1,
            "held by the cooldown",
            monitor="quality",
            channel="webhook",
            result="deferred",
        )
        assert _value(daemon, "tracescorer_monitor_state", monitor="quality", state="firing") == 1
        assert len(hooks.at("/quality")) == 2 and len(hooks.at("/slack")) == 2
        events = daemon.cli("monitors", "--events", "--monitor", "quality", "--format", "json").stdout
        assert '"event": "deferred"' in events and events.count('"event": "fired"') == 2
        listed = {m["monitor"]: m for m in json.loads(daemon.cli("monitors", "--format", "json").stdout)}
        assert "held by the cooldown until" in listed["quality"]["detail"]
        assert listed["quality"]["last_message"] == "resolved"
        assert hooks.at("/patient") == []
    finally:
        assert daemon.stop() == 0, daemon.log()
