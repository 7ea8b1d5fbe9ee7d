"""Monitors driven by a series of scores through the real daemon: OTel SDK exporter -> `tracescorer
serve` -> a code scorer whose score each run's answer names (tests/support/outcome.py) -> monitors
-> a real local webhook receiver. What each test checks is what a receiver ends up believing.

Each step of a series waits until the daemon counted it (``tracescorer_monitor_samples``), so a
step is evaluated before the next one arrives; how long a step takes is the machine's business and
no assertion depends on it (the durations only make what is asserted more or less likely to be
exercised, never whether it holds).
"""

from __future__ import annotations

import datetime as dt
import json
import urllib.request
from typing import Any

import pytest
from fakes.webhook_receiver import Received, WebhookReceiver
from prometheus_client.parser import text_string_to_metric_families
from support.daemon import DaemonProcess, config_dict, wait_for

from tracescorer.demo import emit_conversations

_seq = iter(range(1_000_000))


@pytest.fixture
def hooks():
    with WebhookReceiver() as receiver:
        yield receiver


def _daemon(tmp_path: Any, hooks: WebhookReceiver, **monitor: Any) -> DaemonProcess:
    rule = {
        "id": "quality",
        "scorer": "outcome",
        "aggregate": "pass_rate",
        "window": "10m",  # holds the whole series: each value follows from the counts alone
        "notify": [{"webhook": hooks.url + "/hook", "retries": 0}],
        **monitor,
    }
    cfg = config_dict(
        tmp_path,
        assembly={"idle_s": 0.3},
        scorers=[{"id": "outcome", "python": "support.outcome:scorer", "scope": "run", "threshold": 1}],
        monitors=[rule],
    )
    return DaemonProcess(tmp_path, cfg).start()


def _metric(daemon: DaemonProcess, name: str, **labels: str) -> float | None:
    text = urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10).read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == {"monitor": "quality", **labels}:
                return s.value
    return None


def _samples(daemon: DaemonProcess) -> float | None:
    return _metric(daemon, "tracescorer_monitor_samples")


class Series:
    """Sends passing (score 1) and failing (score 0) runs and waits until the monitor counted them."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon = daemon
        self.sent = 0

    def step(self, passes: int = 0, fails: int = 0) -> None:
        answers = ["score=1"] * passes + ["score=0"] * fails
        conversations = [
            {"id": f"c-{next(_seq)}", "agent": "support", "turns": [("How is my order?", None, None, None, a)]}
            for a in answers
        ]
        emit_conversations(self.daemon.grpc_endpoint, conversations)
        self.sent += len(answers)
        wait_for(lambda: _samples(self.daemon) == self.sent, 60, interval_s=0.1, what=f"{self.sent} scores counted")


def _messages(hooks: WebhookReceiver) -> list[Received]:
    return hooks.at("/hook")


def _statuses(hooks: WebhookReceiver) -> list[str]:
    return [m.body["status"] for m in _messages(hooks)]


def _at(message: Received) -> float:
    return dt.datetime.fromisoformat(message.body["at"]).timestamp()


def _listed(daemon: DaemonProcess) -> dict[str, Any]:
    [row] = [r for r in json.loads(daemon.cli("monitors", "--format", "json").stdout) if r["monitor"] == "quality"]
    return row


def _events(daemon: DaemonProcess) -> list[dict[str, Any]]:
    return daemon.query_json(
        "SELECT event, epoch(event_at) AS at, detail FROM monitor_events WHERE monitor_id = 'quality' ORDER BY event_at"
    )


def test_a_series_around_the_threshold_fires_at_most_once_and_the_last_message_is_the_truth(tmp_path, hooks):
    """The issue's flapping: a pass rate going below 0.8 and back again and again. The pending period
    holds short dips back; once firing, only a value back at the recovery threshold counts as clear,
    so however long each dip lasts on this machine it fires at most once. The real drop fires; the
    recovery resolves; the receiver's last message is the state `tracescorer monitors` shows."""
    daemon = _daemon(
        tmp_path, hooks, below=0.8, min_samples=10, recovery_threshold=0.85, keep_firing_for="1s", **{"for": "2s"}
    )
    try:
        series = Series(daemon)
        series.step(passes=8, fails=2)  # 0.8: not below
        for _ in range(4):
            series.step(fails=1)  # 0.73 .. 0.76: below
            series.step(passes=4)  # 0.8 again: not below, but not back at 0.85 either
        assert _statuses(hooks).count("firing") <= 1
        assert "resolved" not in _statuses(hooks)
        # the series did cross the threshold: the first dip made the monitor pending
        assert (_metric(daemon, "tracescorer_monitor_transitions_total", state="pending") or 0) >= 1

        series.step(fails=10)  # 24 of 40 = 0.6: the real drop
        wait_for(lambda: _statuses(hooks)[-1:] == ["firing"], 30, interval_s=0.1, what="the drop notified")
        assert _statuses(hooks) == ["firing"]
        assert _listed(daemon)["state"] == "firing" and _listed(daemon)["last_message"] == "firing"

        series.step(passes=70)  # 94 of 110 = 0.855: back past the recovery threshold
        wait_for(lambda: _listed(daemon)["state"] == "resolved", 30, interval_s=0.2, what="resolved")
        wait_for(lambda: _statuses(hooks)[-1:] == ["resolved"], 30, interval_s=0.1, what="the resolve notified")
        assert _statuses(hooks) == ["firing", "resolved"]  # one incident, told once each way
        assert _listed(daemon)["last_message"] == "resolved"
        events = [e["event"] for e in _events(daemon)]
        assert events.count("fired") == 1 and events.count("resolved") == 1
    finally:
        assert daemon.stop() == 0, daemon.log()


def test_a_drop_that_starts_inside_the_cooldown_is_sent_when_the_cooldown_ends(tmp_path, hooks):
    """Fire, resolve, and fail again at once: the second firing is held by the 15 s cooldown and
    sent when it ends (the issue's real incident was recorded as suppressed and never sent)."""
    daemon = _daemon(tmp_path, hooks, below=0.5, min_samples=2, cooldown="15s", **{"for": "0s"})
    try:
        series = Series(daemon)
        series.step(fails=2)  # 0 of 2
        wait_for(lambda: _statuses(hooks) == ["firing"], 30, interval_s=0.1, what="the first firing")
        series.step(passes=4)  # 4 of 6
        wait_for(lambda: _statuses(hooks) == ["firing", "resolved"], 30, interval_s=0.1, what="the resolve")
        series.step(fails=4)  # 4 of 10: fires again
        wait_for(
            lambda: _statuses(hooks) == ["firing", "resolved", "firing"], 60, interval_s=0.2, what="the held firing"
        )
        first, _, again = _messages(hooks)
        assert _at(again) >= _at(first) + 15  # never sooner than the cooldown after the last firing message
        fired = [e["at"] for e in _events(daemon) if e["event"] == "fired"]
        if fired[1] < _at(first) + 15:  # it fired inside the cooldown (on a very slow machine it may not)
            deferred = [e for e in _events(daemon) if e["event"] == "deferred"]
            assert len(deferred) == 1 and "if still firing" in deferred[0]["detail"]
        assert again.body["value"] == 0.4 and again.body["examples"]
        assert _listed(daemon)["state"] == "firing" and _listed(daemon)["last_message"] == "firing"
    finally:
        assert daemon.stop() == 0, daemon.log()


def test_a_long_incident_gets_reminders_at_the_repeat_interval(tmp_path, hooks):
    daemon = _daemon(tmp_path, hooks, below=0.5, min_samples=2, repeat_interval="2s", **{"for": "0s"})
    try:
        series = Series(daemon)
        series.step(fails=4)
        wait_for(lambda: len(_messages(hooks)) >= 3, 60, interval_s=0.2, what="two reminders")
        first, one, two = _messages(hooks)[:3]
        assert [(m.body["status"], m.body["reminder"]) for m in (first, one, two)] == [
            ("firing", 0),
            ("firing", 1),
            ("firing", 2),
        ]
        assert "(reminder 2)" in two.body["message"] and two.body["since"] == first.body["since"]
        assert _at(one) - _at(first) >= 2 and _at(two) - _at(one) >= 2  # never sooner than the interval

        series.step(passes=8)  # 8 of 12: resolved, told at once
        wait_for(lambda: _statuses(hooks)[-1:] == ["resolved"], 30, interval_s=0.1, what="the resolve")
        told = len(_messages(hooks))
        assert _listed(daemon)["state"] == "resolved"
        series.step(passes=1)  # evaluated again: nothing more to say
        assert len(_messages(hooks)) == told and _statuses(hooks)[-1] == "resolved"
    finally:
        assert daemon.stop() == 0, daemon.log()
