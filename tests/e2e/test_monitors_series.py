"""Monitors driven by a series of scores through the daemon: OTel SDK exporter -> an App on the
test's loop -> a code scorer whose score each run's answer names (tests/support/outcome.py) ->
monitors -> a real local webhook receiver. What each test checks is what a receiver ends up
believing, and what `tracescorer monitors` shows.

The App runs on a :class:`ManualClock`: pending periods, clear periods, cooldowns and reminder
intervals pass when the test moves it, never while it waits. Each step of a series sends its
runs, waits until the daemon stored them, moves the clock a step on (the assembly measures idle
time with the App's clock) and waits until the monitor counted them (moving the clock on again if
they are not counted within seconds, a few times at most: :class:`support.monitored.Monitored`). So
a score is counted within seconds of clock time of when it was sent: every period here is minutes long, and
each test moves the clock across a period by itself (to just before its end, then to it).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from fakes.webhook_receiver import Received, WebhookReceiver
from support.clock import ManualClock
from support.daemon import config_dict, query_rows, wait_for_async
from support.monitored import Monitored

from tracescorer.app import App
from tracescorer.cli import main
from tracescorer.config import Settings


@pytest.fixture
def hooks():
    with WebhookReceiver() as receiver:
        yield receiver


class Daemon(Monitored):
    """An App on the test's loop with the ``quality`` monitor, its clock, and its config file."""

    def __init__(self, app: App, clock: ManualClock, config_path: Path) -> None:
        super().__init__(app, clock, "quality")
        self.config_path = config_path

    async def step(self, passes: int = 0, fails: int = 0) -> None:
        """Passing (score 1) and failing (score 0) runs, counted by the monitor (see the module doc)."""
        await self.send("support", ["score=1"] * passes + ["score=0"] * fails)

    async def at(self, when: float) -> None:
        """Move the clock to ``when`` and evaluate there (what the one-second timer does), then wait
        until what that decided to send was attempted."""
        assert when >= self.clock.time()
        self.clock.advance(when - self.clock.time())
        self.service.evaluate_now()
        await self.told()

    async def told(self) -> None:
        """Every message decided so far was attempted to the end."""
        await wait_for_async(lambda: self.service.state("quality").unsent is None, 30, what="messages sent")

    def state(self) -> Any:
        return self.service.state("quality")

    async def listed(self) -> dict[str, Any]:
        """The ``quality`` row of `tracescorer monitors --format json` (the stored state)."""

        def run() -> dict[str, Any]:
            result = CliRunner().invoke(main, ["monitors", "--config", str(self.config_path), "--format", "json"])
            assert result.exit_code == 0, result.output
            [row] = [r for r in json.loads(result.stdout) if r["monitor"] == "quality"]
            return row

        return await asyncio.to_thread(run)

    async def listed_until(self, **expected: str) -> dict[str, Any]:
        """The listed row once it shows ``expected`` (the state is stored one write at a time)."""

        async def shown() -> dict[str, Any] | None:
            row = await self.listed()
            return row if all(row[k] == v for k, v in expected.items()) else None

        row: dict[str, Any] = await wait_for_async(shown, 30, what=f"`tracescorer monitors` to show {expected}")
        return row

    async def events(self) -> list[dict[str, Any]]:
        sql = (
            "SELECT event, epoch(event_at) AS at, detail FROM monitor_events "
            "WHERE monitor_id = 'quality' ORDER BY event_at"
        )
        return await asyncio.to_thread(query_rows, self.app.settings.store.path, sql)


@contextlib.asynccontextmanager
async def _daemon(tmp_path: Path, hooks: WebhookReceiver, **monitor: Any) -> AsyncIterator[Daemon]:
    rule = {
        "id": "quality",
        "scorer": "outcome",
        "aggregate": "pass_rate",
        "window": "1d",  # holds the whole series: each value follows from the counts alone
        "notify": [{"webhook": hooks.url + "/hook", "retries": 0}],
        **monitor,
    }
    cfg = config_dict(
        tmp_path,
        assembly={"idle_s": 0.05},
        store={"results_delay_s": 0},  # scores committed (and counted) as soon as they are scored
        scorers=[{"id": "outcome", "python": "support.outcome:scorer", "scope": "run", "threshold": 1}],
        monitors=[rule],
        workers={"count": 0},  # the stages on the test's loop, on its clock
    )
    config_path = tmp_path / "tracescorer.yaml"
    config_path.write_text(yaml.safe_dump(cfg))
    clock = ManualClock(start=float(int(time.time())))
    app = App(Settings.model_validate(cfg), clock=clock)
    await app.start()
    try:
        yield Daemon(app, clock, config_path)
    finally:
        await app.stop()


def _messages(hooks: WebhookReceiver) -> list[Received]:
    return hooks.at("/hook")


def _statuses(hooks: WebhookReceiver) -> list[str]:
    return [m.body["status"] for m in _messages(hooks)]


def _at(message: Received) -> float:
    return dt.datetime.fromisoformat(message.body["at"]).timestamp()


async def test_a_series_around_the_threshold_fires_at_most_once_and_the_last_message_is_the_truth(tmp_path, hooks):
    """The issue's flapping: a pass rate going below 0.8 and back again and again. The pending period
    holds short dips back; once firing, only a value back at the recovery threshold counts as clear,
    so the dips after it neither resolve it nor fire it again; a value back there resolves it once
    it stayed clear for keep_firing_for. The receiver's last message is the state `tracescorer
    monitors` shows."""
    async with _daemon(
        tmp_path, hooks, below=0.8, min_samples=10, recovery_threshold=0.85, keep_firing_for="2m", **{"for": "2m"}
    ) as d:
        await d.step(passes=8, fails=2)  # 0.8: not below
        for _ in range(4):
            await d.step(fails=1)  # 0.73 .. 0.76: below, pending
            assert d.state().state == "pending"
            await d.step(passes=4)  # 0.8 again: not below before the pending period passed
            assert d.state().state == "ok"
        await d.at(d.clock.time() + 120)
        assert _statuses(hooks) == [] and d.transitions("pending") == 4 and d.transitions("firing") == 0

        await d.step(fails=1)  # 24 of 31 = 0.77: a dip that lasts
        since = d.state().since
        await d.at(since + 119)
        assert d.state().state == "pending" and _statuses(hooks) == []
        await d.at(since + 120)
        assert d.state().state == "firing"
        assert _statuses(hooks) == ["firing"]
        await d.listed_until(state="firing", last_message="firing")

        for _ in range(3):  # back to 0.8 and below again: not back at 0.85, so not clear
            await d.step(passes=4)
            await d.at(d.clock.time() + 300)
            assert d.state().state == "firing" and d.state().clear_since is None
            await d.step(fails=1)
        assert _statuses(hooks) == ["firing"]

        await d.step(passes=30)  # 66 of 76 = 0.87: back past the recovery threshold
        clear = d.state().clear_since
        assert d.state().state == "firing" and clear is not None
        await d.at(clear + 119)
        assert d.state().state == "firing" and _statuses(hooks) == ["firing"]
        await d.at(clear + 120)
        assert d.state().state == "resolved"
        assert _statuses(hooks) == ["firing", "resolved"]  # one incident, told once each way
        await d.listed_until(state="resolved", last_message="resolved")
        events = [e["event"] for e in await d.events()]
        assert events.count("fired") == 1 and events.count("resolved") == 1


async def test_a_drop_that_starts_inside_the_cooldown_is_sent_when_the_cooldown_ends(tmp_path, hooks):
    """Fire, resolve, and fail again at once: the second firing is held by the cooldown and sent
    when it ends (the issue's real incident was recorded as suppressed and never sent)."""
    async with _daemon(tmp_path, hooks, below=0.5, min_samples=2, cooldown="15m", **{"for": "0s"}) as d:
        await d.step(fails=2)  # 0 of 2
        await d.told()
        assert _statuses(hooks) == ["firing"]
        first_at = d.state().notified_at
        await d.step(passes=4)  # 4 of 6
        await d.told()
        assert _statuses(hooks) == ["firing", "resolved"]
        await d.step(fails=4)  # 4 of 10: fires again, inside the cooldown
        assert d.state().state == "firing"
        await d.at(first_at + 900 - 1)
        assert _statuses(hooks) == ["firing", "resolved"]  # held
        deferred = await wait_for_async(lambda: _deferred(d), 30, what="the deferred event stored")
        assert len(deferred) == 1 and "if still firing" in deferred[0]["detail"]
        listed = await d.listed_until(state="firing", last_message="resolved")
        assert "held by the cooldown until" in listed["detail"]

        await d.at(first_at + 900)  # the cooldown ends, still firing: sent now
        assert _statuses(hooks) == ["firing", "resolved", "firing"]
        first, _, again = _messages(hooks)
        assert _at(again) >= _at(first) + 900  # never sooner than the cooldown after the last firing message
        assert again.body["value"] == 0.4 and again.body["examples"]
        fired = [e["at"] for e in await d.events() if e["event"] == "fired"]
        assert len(fired) == 2 and fired[1] < _at(first) + 900  # it fired inside the cooldown
        await d.listed_until(state="firing", last_message="firing")


async def _deferred(d: Daemon) -> list[dict[str, Any]]:
    return [e for e in await d.events() if e["event"] == "deferred"]


async def test_a_long_incident_gets_reminders_at_the_repeat_interval(tmp_path, hooks):
    async with _daemon(tmp_path, hooks, below=0.5, min_samples=2, repeat_interval="1h", **{"for": "0s"}) as d:
        await d.step(fails=4)
        await d.told()
        for n in (1, 2):
            due = d.state().notified_at + 3600
            await d.at(due - 1)
            assert len(_messages(hooks)) == n  # never sooner than the interval
            await d.at(due)
            assert len(_messages(hooks)) == n + 1
        first, one, two = _messages(hooks)
        assert [(m.body["status"], m.body["reminder"]) for m in (first, one, two)] == [
            ("firing", 0),
            ("firing", 1),
            ("firing", 2),
        ]
        assert "(reminder 2)" in two.body["message"] and two.body["since"] == first.body["since"]
        assert _at(one) - _at(first) >= 3600 and _at(two) - _at(one) >= 3600

        await d.step(passes=8)  # 8 of 12: resolved, told at once
        await d.told()
        assert _statuses(hooks)[-1:] == ["resolved"]
        told = len(_messages(hooks))
        await d.listed_until(state="resolved", last_message="resolved")
        await d.step(passes=1)  # evaluated again: nothing more to say
        await d.at(d.clock.time() + 2 * 3600)  # and no reminder of a resolved incident
        assert len(_messages(hooks)) == told and _statuses(hooks)[-1] == "resolved"
