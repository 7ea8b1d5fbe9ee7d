"""MonitorService on a real DuckDB file, notifying a real local webhook receiver.

The service's clock is a :class:`ManualClock` started at the wall time (the store stamps scores
with its own): windows slide and cooldowns pass when the test moves it, never while it waits; scores are committed to the ``scores`` table first and then handed to
``on_scores``, as the scoring runner does.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from fakes.webhook_receiver import WebhookReceiver
from support import store_ops
from support.clock import ManualClock
from support.daemon import wait_for_async
from support.db import fetch

from tracescorer.config.monitors import MonitorSettings
from tracescorer.metrics import Metrics
from tracescorer.monitors import MonitorService
from tracescorer.records.scores import ScoreRecord
from tracescorer.store.duckdb import DuckDBStore

SCORERS = ["quality-judge", "quality-code", "other"]


_counter = iter(range(1_000_000))


def score(
    label: str | None,
    *,
    scorer: str = "quality-judge",
    status: str = "ok",
    value: float | None = None,
    source: str = "live",
    reason: str = "judge said so",
) -> ScoreRecord:
    i = next(_counter)
    if value is None and status == "ok":
        value = 1.0 if label == "pass" else 0.0
    return ScoreRecord(
        id=f"s{i}",
        scorer_id=scorer,
        scorer_name=scorer,
        run_id=f"run-{i}",
        trace_id=f"{i:032x}",
        span_id=f"{i:016x}",
        conversation_id=f"conv-{i}",
        entity_type="conversation",
        entity_id="support-bot",
        source=source,
        score=value if status == "ok" else None,
        reason=f"{reason} #{i}" if status == "ok" else None,
        status=status,
        error="judge down" if status == "error" else None,
        label=label,
        threshold=1.0 if label else None,
    )


def monitor(**overrides: Any) -> MonitorSettings:
    base: dict[str, Any] = {
        "id": "support-quality",
        "scorer": "quality-*",
        "aggregate": "pass_rate",
        "window": "1h",
        "below": 0.8,
        "min_samples": 4,
        "cooldown": "1h",
        "for": "0s",  # fire on the first breach (the pending period has tests of its own)
    }
    return MonitorSettings.model_validate({**base, **overrides})


@pytest.fixture
def receiver():
    with WebhookReceiver() as r:
        yield r


@pytest.fixture
async def store(tmp_path):
    s = DuckDBStore(tmp_path / "m.duckdb")
    await s.start()
    yield s
    await s.stop()


class Harness:
    def __init__(self, store: DuckDBStore, monitors: list[MonitorSettings], clock: ManualClock) -> None:
        self.store = store
        self.metrics = Metrics()
        self.service = MonitorService(monitors, SCORERS, store, self.metrics, clock=clock, tick_s=3600)

    async def commit(self, *records: ScoreRecord) -> None:
        await self.store.write_scores(records, [])
        self.service.on_scores(records)

    def state(self, monitor_id: str = "support-quality") -> Any:
        return self.service.state(monitor_id)

    async def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return await fetch(self.store, sql)

    def metric(self, name: str, **labels: str) -> float | None:
        return self.metrics.registry.get_sample_value(name, labels)

    async def idle(self) -> None:
        """Every decided notification was attempted to the end (and its outcome stored)."""
        await wait_for_async(lambda: self.service._dispatcher.outstanding == 0, what="notifications sent")
        await asyncio.sleep(0)


async def test_fires_once_after_min_samples_then_resolves(store, receiver):
    clock = ManualClock(start=time.time())
    m = monitor(
        notify=[{"webhook": receiver.url + "/q", "retries": 0}, {"slack": receiver.url + "/slack", "retries": 0}],
        trace_url="https://traces.example/trace/{trace_id}",
    )
    h = Harness(store, [m], clock)
    await h.service.start()
    try:
        await h.commit(*(score("fail") for _ in range(3)))
        assert h.state().state == "ok" and h.state().samples == 3  # below min_samples: no verdict
        assert h.service._dispatcher.outstanding == 0 and receiver.requests == []

        await h.commit(score("fail", scorer="quality-code"))  # the glob covers both scorers
        assert h.state().state == "firing" and h.state().value == 0.0
        await h.idle()
        [hook] = receiver.at("/q")
        body = hook.body
        assert body["status"] == "firing" and body["monitor"] == "support-quality" and body["value"] == 0.0
        assert body["window"] == "1h" and body["samples"] == 4 and body["threshold"] == 0.8
        assert body["comparison"] == "below" and body["aggregate"] == "pass_rate"
        assert "support-quality" in body["message"] and "1h" in body["message"]
        examples = body["examples"]
        assert len(examples) == 4 and examples[0]["scorer_id"] == "quality-code"  # newest first
        assert all(e["trace_id"] and e["conversation_id"] and e["reason"] for e in examples)
        assert examples[1]["url"] == f"https://traces.example/trace/{examples[1]['trace_id']}"
        [slack] = receiver.at("/slack")
        assert "support-quality" in slack.body["text"] and slack.body["blocks"]
        assert examples[1]["trace_id"] in str(slack.body["blocks"])

        # more failures while firing: no second notification
        await h.commit(*(score("fail") for _ in range(3)))
        h.service.evaluate_now()
        await h.idle()
        assert len(receiver.at("/q")) == 1 and h.state().state == "firing"

        # 28 passes: 28 of 35 = 0.8 is no longer below 0.8
        await h.commit(*(score("pass") for _ in range(28)))
        assert h.state().state == "resolved"
        await h.idle()
        resolved = receiver.at("/q")[-1].body
        assert resolved["status"] == "resolved" and resolved["value"] == 0.8 and resolved["examples"] == []
        assert len(receiver.at("/q")) == 2 and len(receiver.at("/slack")) == 2
        assert (
            h.metric(
                "tracescorer_monitor_notifications_total", monitor="support-quality", channel="webhook", result="sent"
            )
            == 2
        )
        assert h.metric("tracescorer_monitor_state", monitor="support-quality", state="resolved") == 1
        assert h.metric("tracescorer_monitor_state", monitor="support-quality", state="firing") == 0
        assert h.metric("tracescorer_monitor_samples", monitor="support-quality") == 35
    finally:
        await h.service.stop(time.monotonic() + 5)
    state = await h.rows("SELECT state, value, samples, pending FROM monitor_state")
    assert state == [("resolved", 0.8, 35, None)]
    events = [r[0] for r in await h.rows("SELECT event FROM monitor_events ORDER BY event_at, event")]
    assert events.count("fired") == 1 and events.count("resolved") == 1 and events.count("notified") == 4


async def test_a_firing_inside_the_cooldown_is_sent_when_the_cooldown_ends(store, receiver):
    clock = ManualClock(start=time.time())
    m = monitor(window="1d", below=0.5, min_samples=2, notify=[{"webhook": receiver.url + "/c", "retries": 0}])
    h = Harness(store, [m], clock)
    await h.service.start()
    try:
        await h.commit(score("fail"), score("fail"))
        assert h.state().state == "firing"
        await h.commit(*(score("pass") for _ in range(4)))  # 4/6
        assert h.state().state == "resolved"
        await h.commit(*(score("fail") for _ in range(4)))  # 4/10: fires again, inside the cooldown
        assert h.state().state == "firing"
        await h.idle()
        assert [r.body["status"] for r in receiver.at("/c")] == ["firing", "resolved"]
        deferred = {"monitor": "support-quality", "channel": "webhook", "result": "deferred"}
        assert h.metric("tracescorer_monitor_notifications_total", **deferred) == 1
        clock.advance(1800)
        h.service.evaluate_now()  # still inside the cooldown: held
        await h.idle()
        assert len(receiver.at("/c")) == 2

        clock.advance(1800)  # the cooldown ends, still firing: the firing goes out now
        h.service.evaluate_now()
        await h.idle()
        assert [r.body["status"] for r in receiver.at("/c")] == ["firing", "resolved", "firing"]
        assert receiver.at("/c")[-1].body["reminder"] == 0 and h.state().notified_state == "firing"

        await h.commit(*(score("pass") for _ in range(12)))  # 14/22: resolves, and says so at once
        await h.idle()
        assert [r.body["status"] for r in receiver.at("/c")] == ["firing", "resolved", "firing", "resolved"]

        await h.commit(*(score("fail") for _ in range(16)))  # 14/38: held again ...
        await h.commit(*(score("pass") for _ in range(30)))  # 44/68: ... and resolved before the cooldown ended
        await h.idle()
        assert len(receiver.at("/c")) == 4 and receiver.at("/c")[-1].body["status"] == "resolved"  # still true
        assert h.metric("tracescorer_monitor_notifications_total", **{**deferred, "result": "cancelled"}) == 1
    finally:
        await h.service.stop(time.monotonic() + 5)
    events = [r[0] for r in await h.rows("SELECT event FROM monitor_events ORDER BY event_at")]
    assert events.count("deferred") == 2 and events.count("cancelled") == 1 and events.count("fired") == 3
    detail = await h.rows("SELECT detail FROM monitor_events WHERE event = 'deferred' ORDER BY event_at LIMIT 1")
    assert "cooldown 1h" in detail[0][0] and "if still firing" in detail[0][0]


async def test_reminders_while_still_firing(store, receiver):
    clock = ManualClock(start=time.time())
    m = monitor(window="1d", repeat_interval="1h", notify=[{"webhook": receiver.url + "/r", "retries": 0}])
    h = Harness(store, [m], clock)
    await h.service.start()
    try:
        await h.commit(*(score("fail") for _ in range(4)))
        await h.idle()
        for _ in range(2):
            clock.advance(3600)
            h.service.evaluate_now()
            await h.idle()
        bodies = [r.body for r in receiver.at("/r")]
        assert [(b["status"], b["reminder"]) for b in bodies] == [("firing", 0), ("firing", 1), ("firing", 2)]
        assert "still firing since" in bodies[2]["message"] and "(reminder 2)" in bodies[2]["message"]
        assert bodies[2]["since"] == bodies[0]["since"] and bodies[2]["examples"]
        h.service.evaluate_now()  # not due again yet
        await h.idle()
        assert len(receiver.at("/r")) == 3
    finally:
        await h.service.stop(time.monotonic() + 5)
    assert await h.rows("SELECT state, reminders, notified_state FROM monitor_state") == [("firing", 2, "firing")]


async def test_a_restart_keeps_a_pending_monitor_counting_from_when_its_breach_began(store, receiver):
    clock = ManualClock(start=time.time())
    m = monitor(**{"for": "10m", "notify": [{"webhook": receiver.url + "/p", "retries": 0}]})
    first = Harness(store, [m], clock)
    await first.service.start()
    await first.commit(*(score("fail") for _ in range(4)))
    began = first.state().since
    assert first.state().state == "pending" and began is not None
    assert first.metric("tracescorer_monitor_state", monitor="support-quality", state="pending") == 1
    await first.service.stop(time.monotonic() + 5)
    assert await first.rows("SELECT state FROM monitor_state") == [("pending",)]

    clock.advance(300)
    second = Harness(store, [m], clock)
    await second.service.start()
    try:
        assert second.state().state == "pending" and second.state().since == pytest.approx(began)
        clock.advance(began + 599 - clock.time())
        second.service.evaluate_now()
        assert second.state().state == "pending"
        clock.advance(2)  # ten minutes after the breach began, across the restart
        second.service.evaluate_now()
        assert second.state().state == "firing"
        await second.idle()
        assert [r.body["status"] for r in receiver.at("/p")] == ["firing"]
    finally:
        await second.service.stop(time.monotonic() + 5)


async def test_a_restart_keeps_the_clear_period_of_a_firing_monitor(store, receiver):
    clock = ManualClock(start=time.time())
    m = monitor(keep_firing_for="10m", notify=[{"webhook": receiver.url + "/k", "retries": 0}])
    first = Harness(store, [m], clock)
    await first.service.start()
    await first.commit(*(score("fail") for _ in range(4)))
    await first.commit(*(score("pass") for _ in range(20)))  # 20/24: clear, but not for 10m yet
    assert first.state().state == "firing" and first.state().clear_since is not None
    clear_since = first.state().clear_since
    await first.idle()
    await first.service.stop(time.monotonic() + 5)

    second = Harness(store, [m], clock)
    await second.service.start()
    try:
        assert second.state().state == "firing" and second.state().clear_since == pytest.approx(clear_since)
        clock.advance(601)
        second.service.evaluate_now()
        assert second.state().state == "resolved"
        await second.idle()
        assert [r.body["status"] for r in receiver.at("/k")] == ["firing", "resolved"]
    finally:
        await second.service.stop(time.monotonic() + 5)


async def test_a_firing_held_by_the_cooldown_at_a_stop_is_sent_by_the_next_start_when_the_cooldown_ends(
    store, receiver
):
    """What a new leader does with the firing its predecessor held back (test_monitors_leader.py
    checks the takeover across daemons): it holds it on from the stored time of the last firing
    message, sends it when the cooldown ends, and tells nothing twice."""
    clock = ManualClock(start=float(int(time.time())))  # whole seconds: stored to the microsecond
    m = monitor(window="1d", below=0.5, min_samples=2, notify=[{"webhook": receiver.url + "/h", "retries": 0}])
    first = Harness(store, [m], clock)
    await first.service.start()
    await first.commit(score("fail"), score("fail"))
    await first.idle()
    first_at = first.state().notified_at
    await first.commit(*(score("pass") for _ in range(4)))  # 4/6: resolved
    await first.commit(*(score("fail") for _ in range(4)))  # 4/10: fires again, inside the cooldown: held
    await first.idle()
    assert first.state().state == "firing" and first.state().notified_state == "resolved"
    await first.service.stop(time.monotonic() + 5)

    clock.advance(600)
    second = Harness(store, [m], clock)
    await second.service.start()
    try:
        await second.idle()
        assert second.state().state == "firing" and second.state().notified_state == "resolved"
        clock.advance(first_at + 3600 - 1 - clock.time())
        second.service.evaluate_now()
        await second.idle()
        assert [r.body["status"] for r in receiver.at("/h")] == ["firing", "resolved"]  # still held
        clock.advance(1)  # an hour after the last firing message, across the restart
        second.service.evaluate_now()
        await second.idle()
        assert [r.body["status"] for r in receiver.at("/h")] == ["firing", "resolved", "firing"]
        assert receiver.at("/h")[-1].body["reminder"] == 0 and second.state().notified_at == first_at + 3600
    finally:
        await second.service.stop(time.monotonic() + 5)
    events = [r[0] for r in await second.rows("SELECT event FROM monitor_events ORDER BY event_at")]
    assert events.count("deferred") == 1 and events.count("notified") == 3 and events.count("fired") == 2


async def test_restart_keeps_a_firing_monitor_firing_without_notifying_again(store, receiver):
    clock = ManualClock(start=time.time())
    m = monitor(notify=[{"webhook": receiver.url + "/r", "retries": 0}])
    first = Harness(store, [m], clock)
    await first.service.start()
    await first.commit(*(score("fail") for _ in range(5)), score("pass"), score(None, status="error"))
    await first.idle()
    assert len(receiver.at("/r")) == 1
    await first.service.stop(time.monotonic() + 5)

    second = Harness(store, [m], clock)
    await second.service.start()
    try:
        state = second.state()
        assert state.state == "firing" and state.samples == 6 and state.value == pytest.approx(1 / 6)
        assert state.since == pytest.approx(first.state().since)
        assert second.service._dispatcher.outstanding == 0
        await second.commit(score("fail"))
        second.service.evaluate_now()
        await second.idle()
        assert len(receiver.at("/r")) == 1  # no duplicate
        await second.commit(*(score("pass") for _ in range(30)))  # 31/37: resolves, and says so
        await second.idle()
        assert [r.body["status"] for r in receiver.at("/r")] == ["firing", "resolved"]
    finally:
        await second.service.stop(time.monotonic() + 5)


async def test_rebuilt_window_counts_only_live_scores_inside_the_window(store, receiver):
    clock = ManualClock(start=time.time())
    m = monitor(notify=[])
    h = Harness(store, [m], clock)
    await h.service.start()
    await h.commit(score("fail"), score("pass"), score("pass"))
    await h.commit(*(score("fail", source="backfill") for _ in range(5)))  # history, not current quality
    await h.commit(score("fail", scorer="other"))  # not watched
    assert h.state().samples == 3
    await h.service.stop(time.monotonic() + 5)
    # an hour-old score is outside the window
    await store.write(
        store_ops.execute,
        "UPDATE scores SET updated_at = now() - INTERVAL 2 HOUR WHERE id = (SELECT min(id) FROM scores)",
        [],
    )
    again = Harness(store, [m], clock)
    await again.service.start()
    try:
        assert again.state().samples == 2 and again.state().value == pytest.approx(1.0)
    finally:
        await again.service.stop(time.monotonic() + 5)


async def test_window_slides_and_an_empty_window_resolves(store, receiver):
    clock = ManualClock(start=time.time())
    m = monitor(
        aggregate="mean",
        window="90s",
        below=0.5,
        min_samples=2,
        notify=[{"webhook": receiver.url + "/w", "retries": 0}],
    )
    h = Harness(store, [m], clock)
    await h.service.start()
    try:
        await h.commit(score(None, value=0.1), score(None, value=0.3))
        assert h.state().state == "firing" and h.state().value == pytest.approx(0.2)
        await h.idle()
        examples = receiver.at("/w")[0].body["examples"]
        assert [e["score"] for e in examples] == [0.3, 0.1]  # both below the threshold
        clock.advance(60)
        h.service.evaluate_now()
        assert h.state().state == "firing" and h.state().samples == 2
        clock.advance(40)  # 100s later: both scores left the 90s window
        h.service.evaluate_now()
        assert h.state().state == "resolved" and h.state().value is None and h.state().samples == 0
        await h.idle()
        assert [r.body["status"] for r in receiver.at("/w")] == ["firing", "resolved"]
    finally:
        await h.service.stop(time.monotonic() + 5)


async def test_count_and_error_rate_monitors(store, receiver):
    clock = ManualClock(start=time.time())
    quiet = monitor(id="no-scores", aggregate="count", window="10m", below=1, notify=[])
    errors = monitor(
        id="judge-errors", aggregate="error_rate", window="10m", below=None, above=0.25, min_samples=4, notify=[]
    )
    h = Harness(store, [quiet, errors], clock)
    await h.service.start()
    try:
        assert h.state("no-scores").state == "firing"  # count ignores min_samples: nothing scored at all
        await h.commit(score("pass"), score("pass"), score("pass"))
        assert h.state("no-scores").state == "resolved" and h.state("judge-errors").state == "ok"
        await h.commit(score(None, status="error"), score(None, status="error"))
        assert h.state("judge-errors").state == "firing" and h.state("judge-errors").value == pytest.approx(0.4)
        assert h.metric("tracescorer_monitor_value", monitor="judge-errors") == pytest.approx(0.4)
    finally:
        await h.service.stop(time.monotonic() + 5)


async def _cut_off_firing(store: DuckDBStore, receiver: WebhookReceiver, path: str) -> Harness:
    """A monitor fires and the daemon stops while its endpoint hangs: the firing stays unsent.
    Returns a second service on the same store, not started."""
    clock = ManualClock(start=time.time())
    receiver.hang(path, 5.0)
    m = monitor(min_samples=1, notify=[{"webhook": receiver.url + path, "retries": 0, "timeout_s": 30}])
    first = Harness(store, [m], clock)
    await first.service.start()
    await first.commit(score("fail"))
    assert first.state().unsent == "firing"
    await first.service.stop(time.monotonic() + 0.2)  # the endpoint is still hanging: give up on it
    assert await first.rows("SELECT state, pending FROM monitor_state") == [("firing", "firing")]
    return Harness(store, [m], clock)


async def test_a_notification_cut_off_by_the_stop_is_sent_after_the_next_start(store, receiver):
    second = await _cut_off_firing(store, receiver, "/p")
    await second.service.start()
    try:
        await second.idle()
        assert second.state().unsent is None
        assert any(r.body["status"] == "firing" and r.status == 200 for r in receiver.at("/p"))
    finally:
        await second.service.stop(time.monotonic() + 5)
    assert await second.rows("SELECT pending FROM monitor_state") == [(None,)]
    assert await second.rows("SELECT count(*) FROM monitor_events WHERE event = 'notified'") == [(1,)]


async def test_a_message_cut_off_by_the_stop_that_is_no_longer_true_is_not_sent(store, receiver):
    second = await _cut_off_firing(store, receiver, "/u")
    await store.write_scores([score("pass") for _ in range(9)], [])  # meanwhile: 9 of 10 pass
    await second.service.start()
    try:
        await second.idle()
        state = second.state()
        assert state.state == "resolved" and state.unsent is None and state.notified_state == "resolved"
        # nothing to tell: the targets never heard of the firing, and it is over
        assert [r for r in receiver.at("/u") if r.status == 200 and r.body["status"] == "resolved"] == []
    finally:
        await second.service.stop(time.monotonic() + 5)
    events = [r[0] for r in await second.rows("SELECT event FROM monitor_events ORDER BY event_at")]
    assert "cancelled" not in events and events.count("resolved") == 1
