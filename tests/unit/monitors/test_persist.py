"""The monitors' state writer: one write at a time, so the state stored last is the newest (two
writes in flight on a PostgreSQL pool could commit out of order and leave an older state for the
next leader), changes made meanwhile go in the next write, a failed write is retried."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from support.daemon import wait_for_async

from tracescorer.monitors.persist import StateWriter
from tracescorer.records.monitors import MonitorEvent, MonitorState, Rebuilt, WindowSpec


class SlowStore:
    """A MonitorStore in memory whose writes wait for the test to let them finish."""

    def __init__(self) -> None:
        self.rows: dict[str, MonitorState] = {}
        self.events: list[MonitorEvent] = []
        self.writes: list[list[MonitorState]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.gate = asyncio.Event()
        self.fail_next = False

    async def save_monitors(self, states: Sequence[MonitorState], events: Sequence[MonitorEvent]) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.gate.wait()
            if self.fail_next:
                self.fail_next = False
                raise OSError("connection lost")
            self.writes.append(list(states))
            self.rows.update({s.monitor_id: s for s in states})
            self.events += events
        finally:
            self.in_flight -= 1

    async def monitor_states(self, monitor_ids: Sequence[str]) -> list[MonitorState]:
        return [self.rows[m] for m in monitor_ids if m in self.rows]

    async def prune_monitor_events(self, now: float) -> int:
        return 0

    async def rebuild_monitor_windows(self, specs: Sequence[WindowSpec], max_examples: int) -> Rebuilt:
        return Rebuilt([], [])


async def test_one_write_at_a_time_and_the_newest_state_is_stored_last():
    store = SlowStore()
    states = [MonitorState(monitor_id="m", state="firing", unsent="firing")]
    writer = StateWriter(store, lambda i: states[i], interval_s=10)
    writer.changed(0)
    writer.event(MonitorEvent(monitor_id="m", at=1.0, event="fired"))
    writer.flush(1.0)
    states[0] = MonitorState(monitor_id="m", state="firing", unsent=None)  # the message went out meanwhile
    writer.changed(0)
    writer.event(MonitorEvent(monitor_id="m", at=2.0, event="notified"))
    writer.flush(2.0, force=True)
    await asyncio.sleep(0.05)
    assert store.in_flight == 1  # the second waits for the first
    store.gate.set()
    await writer.drain(5.0)
    assert store.most_in_flight == 1 and len(store.writes) == 2
    assert store.rows["m"].unsent is None  # the newest, stored last
    assert [e.event for e in store.events] == ["fired", "notified"]


async def test_a_failed_write_is_retried_with_the_next_one_and_stale_states_wait_for_the_interval():
    store = SlowStore()
    store.gate.set()
    store.fail_next = True
    states = [MonitorState(monitor_id="a", state="pending"), MonitorState(monitor_id="b", value=0.5)]
    writer = StateWriter(store, lambda i: states[i], interval_s=10)
    writer.changed(0)
    writer.flush(100.0)
    await wait_for_async(lambda: store.in_flight == 0 and not store.fail_next, what="the failed write")
    assert store.rows == {}
    writer.stale(1)
    writer.flush(105.0)  # the failed state again; b only moved its value: not due yet
    await writer.drain(5.0)
    assert set(store.rows) == {"a"}
    writer.flush(111.0)  # the interval passed
    await writer.drain(5.0)
    assert set(store.rows) == {"a", "b"}
