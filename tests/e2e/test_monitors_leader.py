"""Monitor state across a change of leader: two `tracescorer serve` processes on one real PostgreSQL,
the one holding the monitors' lock stops, the other carries on from the stored state. A firing held
back by the cooldown when the leader stops stays held by the new leader (from the stored time of
the last firing message; that it is sent when the cooldown ends, across a restart, is
tests/contract/monitors/test_service.py's); a pending monitor keeps counting from when its breach
began; nothing is told twice."""

from __future__ import annotations

import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fakes.webhook_receiver import WebhookReceiver
from prometheus_client.parser import text_string_to_metric_families
from support.daemon import DaemonProcess, config_dict, wait_for

from tracescorer.demo import emit_conversations

LEADS = "this daemon runs the monitors"

_seq = iter(range(1_000_000))


def _config(root: Path, name: str, dsn: str, hooks: WebhookReceiver) -> tuple[Path, dict[str, Any]]:
    home = root / name
    home.mkdir()
    rule = {"scorer": "outcome", "aggregate": "pass_rate", "window": "1h", "below": 0.5, "min_samples": 2}
    cfg = config_dict(
        home,
        # the leader recounts the windows at each tick (1 s), not every 5 s: each step below waits for one
        store={"backend": "postgres", "postgres": {"dsn": dsn}, "monitor_rebuild_s": 0.5},
        assembly={"idle_s": 0.3},
        scorers=[{"id": "outcome", "python": "support.outcome:scorer", "scope": "run", "threshold": 1}],
        monitors=[
            {
                **rule,
                "id": "quick",
                "for": "0s",
                "cooldown": "1h",  # the second firing is held across the change of leader
                "notify": [{"webhook": hooks.url + "/quick", "retries": 0}],
            },
            {**rule, "id": "slow", "for": "1h", "notify": [{"webhook": hooks.url + "/slow", "retries": 0}]},
        ],
        shutdown={"grace_s": 10},
        workers={"count": 0},  # what is led is in the daemon's own process; workers only add a delay
    )
    return home, cfg


def _send(daemon: DaemonProcess, *, passes: int = 0, fails: int = 0) -> None:
    answers = ["score=1"] * passes + ["score=0"] * fails
    emit_conversations(
        daemon.grpc_endpoint,
        [{"id": f"c-{next(_seq)}", "agent": "a", "turns": [("q?", None, None, None, a)]} for a in answers],
    )


def _rows(daemon: DaemonProcess, monitor_id: str) -> list[dict[str, Any]]:
    return daemon.query_json(
        "SELECT state, extract(epoch FROM since) AS since, notified_state FROM monitor_state "
        f"WHERE monitor_id = '{monitor_id}'"
    )


def _state(daemon: DaemonProcess, monitor_id: str) -> dict[str, Any]:
    [row] = _rows(daemon, monitor_id)
    return row


def _metric(daemon: DaemonProcess, name: str, **labels: str) -> float | None:
    """A sample of ``quick``'s on the daemon's /metrics."""
    text = urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10).read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == {"monitor": "quick", **labels}:
                return s.value
    return None


def _events(daemon: DaemonProcess, event: str) -> int:
    [row] = daemon.query_json(
        f"SELECT count(*) AS n FROM monitor_events WHERE monitor_id = 'quick' AND event = '{event}'"
    )
    return int(row["n"])


def test_a_new_leader_holds_the_firing_its_predecessor_held_back_and_keeps_the_pending_period(tmp_path, pg_dsn):
    with WebhookReceiver() as hooks:
        daemons = [DaemonProcess(*_config(tmp_path, n, pg_dsn, hooks)) for n in ("a", "b")]
        try:
            with ThreadPoolExecutor(2) as pool:  # side by side, as a deployment starts them
                for started in [pool.submit(d.start) for d in daemons]:
                    started.result()
            leader = wait_for(
                lambda: next((d for d in daemons if LEADS in d.log()), None), 30, interval_s=0.2, what="a leader"
            )
            other = next(d for d in daemons if d is not leader)
            statuses = lambda: [r.body["status"] for r in hooks.at("/quick")]  # noqa: E731

            _send(other, fails=2)  # 0 of 2: quick fires, slow is pending for an hour
            wait_for(lambda: statuses() == ["firing"], 60, interval_s=0.2, what="the first firing")
            # the monitors' state is saved one write at a time: slow's row may follow quick's webhook
            slow = wait_for(
                lambda: next(iter(_rows(other, "slow")), None), 30, interval_s=0.2, what="slow's state saved"
            )
            assert slow["state"] == "pending"
            slow_since = slow["since"]
            _send(other, passes=4)  # 4 of 6
            wait_for(lambda: statuses() == ["firing", "resolved"], 60, interval_s=0.2, what="the resolve")
            _send(other, fails=4)  # 4 of 10: fires again, inside the cooldown: held
            wait_for(lambda: _state(other, "quick")["state"] == "firing", 60, interval_s=0.2, what="firing again")
            wait_for(lambda: _events(other, "deferred") == 1, 30, interval_s=0.2, what="the firing held back")

            assert leader.stop() == 0, leader.log()
            stopped_at = time.time()
            wait_for(lambda: LEADS in other.log(), 30, interval_s=0.2, what="the takeover")
            wait_for(
                lambda: (_metric(other, "tracescorer_monitor_last_evaluation_timestamp_seconds") or 0) > stopped_at,
                30,
                interval_s=0.2,
                what="the new leader's first evaluation",
            )
            assert _metric(other, "tracescorer_monitor_state", state="firing") == 1
            quick = _state(other, "quick")
            assert quick["state"] == "firing" and quick["notified_state"] == "resolved"  # still held, not dropped
            assert statuses() == ["firing", "resolved"]  # not sent before the cooldown ends
            assert _events(other, "deferred") == 1 and _events(other, "notified") == 2  # nothing told twice
            slow = _state(other, "slow")
            assert slow["state"] == "pending" and slow["since"] == pytest.approx(slow_since)  # kept across leaders
            assert hooks.at("/slow") == []
        finally:
            codes = [d.stop() for d in daemons if d.proc is not None and d.proc.poll() is None]
        assert all(c == 0 for c in codes)
