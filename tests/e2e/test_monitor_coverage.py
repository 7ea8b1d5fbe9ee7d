"""A coverage monitor through the daemon: OTel SDK exporter -> an App on the test's loop (its one
worker on the same loop, talking to the main process through the worker messages) -> a code
scorer bound with a filter -> decision rows committed -> the coverage monitor -> a real local
webhook receiver.

The silent skip of the issue: after a framework upgrade the agent reports a new name, the
binding's ``filter: {agent_name: support}`` stops matching, and every run is ``filtered_out``:
no score row, no error, nothing a score monitor could see. The coverage monitor counts those
targets as eligible and unscored, so it fires, with the filter's clause in the examples. While
the filter matches, it stays quiet.

The App runs on a :class:`ManualClock` (see tests/e2e/test_monitors_series.py): the test moves
it to assemble the runs it sent and to pass the monitor's ``for``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fakes.webhook_receiver import WebhookReceiver
from support.clock import ManualClock
from support.daemon import config_dict, wait_for_async
from support.monitored import Monitored

from tracescorer.app import App
from tracescorer.config import Settings

FOR_S = 120.0


@pytest.fixture
def hooks():
    with WebhookReceiver() as receiver:
        yield receiver


class Daemon(Monitored):
    def __init__(self, app: App, clock: ManualClock) -> None:
        super().__init__(app, clock, "coverage")

    async def runs(self, agent: str, n: int) -> None:
        """``n`` runs of ``agent``, each decided and counted by the coverage monitor (an eligible
        target, scored or not)."""
        await self.send(agent, ["score=1"] * n)

    async def at(self, when: float) -> None:
        """Move the clock to ``when``, evaluate (the one-second timer's pass), wait for what it sent."""
        self.clock.advance(max(0.0, when - self.clock.time()))
        self.service.evaluate_now()
        state = self.service.state("coverage")
        await wait_for_async(lambda: state is not None and self.service.state("coverage").unsent is None, 30)


@contextlib.asynccontextmanager
async def _daemon(tmp_path: Path, hooks: WebhookReceiver, clock: ManualClock) -> AsyncIterator[Daemon]:
    cfg = config_dict(
        tmp_path,
        assembly={"idle_s": 0.05},
        store={"results_delay_s": 0},
        scorers=[
            {
                "id": "outcome",
                "python": "support.outcome:scorer",
                "scope": "run",
                "filter": {"agent_name": "support"},
            }
        ],
        monitors=[
            {
                "id": "coverage",
                "scorer": "outcome",
                "aggregate": "coverage",
                "window": "1d",  # holds the whole test: each value follows from the counts alone
                "below": 0.8,
                "min_samples": 5,
                "for": f"{FOR_S:g}s",
                "notify": [{"webhook": hooks.url + "/hook", "retries": 0}],
            }
        ],
        workers={"count": 0},  # the worker on the test's loop, on its clock
    )
    app = App(Settings.model_validate(cfg), clock=clock)
    await app.start()
    try:
        yield Daemon(app, clock)
    finally:
        await app.stop()


async def test_coverage_fires_when_the_bindings_filter_stops_matching_and_is_quiet_while_it_holds(tmp_path, hooks):
    clock = ManualClock(start=float(int(time.time())))
    async with _daemon(tmp_path, hooks, clock) as d:
        await d.runs("support", 6)
        await d.at(d.clock.time() + 10 * FOR_S)  # long past `for`: every run scored, nothing to say
        state = d.service.state("coverage")
        assert state is not None and (state.state, state.value, state.samples) == ("ok", 1.0, 6)
        assert hooks.at("/hook") == [] and not d.transitions("pending")

        await d.runs("support-agent", 6)  # the upgrade renamed the agent: the filter skips every run
        state = d.service.state("coverage")
        assert state is not None and (state.state, state.value, state.samples) == ("pending", 0.5, 12)
        await d.at(state.since + FOR_S - 1)
        assert d.service.state("coverage").state == "pending" and hooks.at("/hook") == []  # type: ignore[union-attr]
        await d.at(state.since + FOR_S)
        [fired] = hooks.at("/hook")
        body = fired.body
        assert (body["status"], body["aggregate"], body["value"], body["samples"]) == ("firing", "coverage", 0.5, 12)
        assert "coverage of outcome is 0.5, below 0.8" in body["message"] and "12 eligible targets" in body["message"]
        assert body["examples"] and all(e["status"] == "filtered_out" for e in body["examples"])
        assert all("agent_name" in e["reason"] and e["run_id"] for e in body["examples"])

    async with _daemon(tmp_path, hooks, clock) as again:  # a restart rebuilds the window from the decisions
        state = again.service.state("coverage")
        assert state is not None and (state.state, state.value, state.samples) == ("firing", 0.5, 12)
        assert again.samples() == 12 and len(hooks.at("/hook")) == 1  # still firing, not told twice
