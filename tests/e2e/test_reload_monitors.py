"""A configuration reload's monitors, on an App on the test's loop with a clock the test moves:
a monitor firing before a reload that adds another is still firing after it, with no second
notification (its state and window come back from the store); the added one evaluates the
stored scores; a removed one is gone from the running set."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import yaml
from fakes.webhook_receiver import WebhookReceiver
from support.clock import ManualClock
from support.daemon import config_dict, settled, wait_for_async

from tracescorer.app import App
from tracescorer.config import load_settings
from tracescorer.demo import emit_conversations
from tracescorer.monitors import MonitorService


def _service(app: App) -> MonitorService:
    assert isinstance(app.monitors.running, MonitorService)
    return app.monitors.running


async def test_a_reload_keeps_a_firing_monitor_firing_and_adds_a_new_one(tmp_path: Path) -> None:
    with WebhookReceiver() as hooks:
        quality: dict[str, Any] = {
            "id": "quality",
            "scorer": "outcome",
            "aggregate": "pass_rate",
            "window": "1d",
            "below": 0.8,
            "min_samples": 2,
            "notify": [{"webhook": hooks.url + "/hook", "retries": 0}],
        }
        cfg = config_dict(
            tmp_path,
            assembly={"idle_s": 0.05},
            store={"results_delay_s": 0},
            scorers=[{"id": "outcome", "python": "support.outcome:scorer", "threshold": 1}],
            monitors=[quality],
            workers={"count": 0},
        )
        path = tmp_path / "tracescorer.yaml"
        path.write_text(yaml.safe_dump(cfg))
        clock = ManualClock(start=float(int(time.time())))
        app = App(load_settings(path), clock=clock, config_path=path)
        await app.start()
        try:
            turns = [{"id": f"c-{i}", "agent": "a", "turns": [("Hi?", None, None, None, "score=0")]} for i in range(2)]
            await asyncio.to_thread(emit_conversations, f"127.0.0.1:{app.grpc_port}", turns)
            await settled(app)

            async def firing() -> bool:
                clock.advance(0.5)
                state = _service(app).state("quality")
                return state is not None and state.state == "firing" and state.unsent is None

            await wait_for_async(firing, 60, interval_s=0.05, what="quality firing")
            await wait_for_async(lambda: len(hooks.at("/hook")) == 1, 30, what="the firing message")
            before = _service(app)

            volume = {"id": "volume", "scorer": "outcome", "aggregate": "mean", "window": "1d", "above": 0.5}
            cfg["monitors"] = [quality, volume]
            path.write_text(yaml.safe_dump(cfg))
            done = await app.reload()
            assert done.changed == ["monitors"]
            after = _service(app)
            assert after is not before and [m.id for m in after.monitors] == ["quality", "volume"]
            state = after.state("quality")
            assert state is not None and state.state == "firing" and state.samples == 2
            volume_state = after.state("volume")
            assert volume_state is not None and volume_state.samples == 2  # the stored scores, counted
            after.evaluate_now()
            evaluated = after.state("quality")
            assert evaluated is not None and evaluated.unsent is None  # no message decided: none on its way
            assert [m.body["status"] for m in hooks.at("/hook")] == ["firing"]
            firings = app.metrics.registry.get_sample_value(
                "tracescorer_monitor_transitions_total", {"monitor": "quality", "state": "firing"}
            )
            assert firings == 1.0

            cfg["monitors"] = [volume]
            path.write_text(yaml.safe_dump(cfg))
            await app.reload()
            assert [m.id for m in _service(app).monitors] == ["volume"]
            assert (await app.reload()).changed == []  # the same file again: nothing to do
        finally:
            await app.stop()
