"""Clients attached to the daemon's store process (worker processes), and feed state per consumer:
a real store process on a real DuckDB file, attached from this process and from child processes."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
import socket
import sys
import time

import pytest
from support.daemon import wait_for_async
from support.db import fetch
from support.gate import WriterGate

from tracescorer.config import Settings
from tracescorer.metrics import Metrics
from tracescorer.model import Span
from tracescorer.store.api import StoreError
from tracescorer.store.duckdb import DuckDBStore
from tracescorer.store.factory import build_worker_stores


def _span(i: int, trace: int | None = None) -> Span:
    return Span(
        trace_id=f"{trace if trace is not None else i:032x}",
        span_id=f"{i + 1:016x}",
        parent_span_id=None,
        name=f"s{i}",
        kind="internal",
        start_time_unix_nano=i,
        end_time_unix_nano=i + 1,
    )


@pytest.fixture
async def main(tmp_path):
    s = DuckDBStore(tmp_path / "w.duckdb", max_batch_items=100)
    await s.start()
    yield s
    await s.stop()


async def _attached(main: DuckDBStore) -> DuckDBStore:
    sock = main.attach()
    client = DuckDBStore(main.path, attach_fd=sock.detach())
    await client.start()
    return client


async def _names(store: DuckDBStore) -> list[str]:
    return sorted(r[0] for r in await fetch(store, "SELECT name FROM spans"))


# A worker: attaches over the inherited descriptor, stores spans as consumer w1, then exits (or,
# with "hang", says so and waits to be killed).
_CHILD = """
import asyncio, sys
from tracescorer.model import Span
from tracescorer.store.duckdb import DuckDBStore

async def main(fd, path, first, count, hang):
    store = DuckDBStore(path, attach_fd=fd)
    await store.start()
    for i in range(first, first + count):
        span = Span(trace_id=f"{i:032x}", span_id=f"{i + 1:016x}", parent_span_id=None, name=f"s{i}",
                    kind="internal", start_time_unix_nano=i, end_time_unix_nano=i + 1)
        outcome = await store.append([span], span_offsets=[i], consumer="w1")
        assert outcome.stored == 1, outcome
    print("stored", flush=True)
    if hang:
        await asyncio.sleep(3600)
    assert await store.stop()

asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "hang"))
"""


async def _child(main: DuckDBStore, first: int, count: int, hang: bool = False) -> asyncio.subprocess.Process:
    sock = main.attach()
    try:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _CHILD,
            str(sock.fileno()),
            main.path,
            str(first),
            str(count),
            "hang" if hang else "exit",
            pass_fds=(sock.fileno(),),
            stdout=asyncio.subprocess.PIPE,
        )
    finally:
        sock.close()  # the child has its copy


async def test_an_attached_client_and_the_daemon_write_side_by_side(main):
    worker = await _attached(main)
    pid = main.process_pid
    try:
        outcomes = await asyncio.gather(
            *(main.append([_span(i)], span_offsets=[i]) for i in range(20)),
            *(worker.append([_span(i)], span_offsets=[i], consumer="w1") for i in range(20, 40)),
            worker.set_feed_offset(7, consumer="w1"),
        )
        assert all(o.stored == 1 for o in outcomes[:40])
        assert await _names(main) == await _names(worker) == sorted(f"s{i}" for i in range(40))
        # each sees the other's rows
        assert await fetch(worker, "SELECT name FROM spans WHERE trace_id = ?", f"{1:032x}") == [("s1",)]
        assert await main.feed_offset("w1") == 7 and await main.rows_through("w1") == 39
        assert worker.accepting and worker.write_failure is None
    finally:
        assert await worker.stop()
    # the worker's stop ends its channel only
    assert main.accepting and main.process_pid == pid
    assert (await main.append([_span(40)])).stored == 1
    assert not worker.accepting and not worker.lost.is_set()


async def test_a_child_process_writes_over_an_attached_channel(main):
    children = [await _child(main, 100 * k, 30) for k in (1, 2)]
    local = [await main.append([_span(i)], span_offsets=[i]) for i in range(10)]
    for child in children:
        assert await asyncio.wait_for(child.wait(), 60) == 0
    assert all(o.stored == 1 for o in local)
    names = await _names(main)
    assert len(names) == 70 and "s100" in names and "s229" in names
    assert await main.rows_through("w1") == 229


async def test_a_killed_worker_does_not_stop_the_store(main):
    pid = main.process_pid
    child = await _child(main, 100, 5, hang=True)
    assert child.stdout is not None
    assert await asyncio.wait_for(child.stdout.readline(), 60) == b"stored\n"
    child.kill()
    await child.wait()
    await asyncio.sleep(0.2)  # the store process sees the channel end
    assert main.process_pid == pid and main.accepting and main.write_failure is None
    assert (await main.append([_span(1)])).stored == 1
    assert await _names(main) == sorted(["s1", *(f"s{i}" for i in range(100, 105))])
    # and it still attaches new workers
    worker = await _attached(main)
    assert (await worker.append([_span(2)])).stored == 1
    assert await worker.stop()


async def test_an_attached_client_closing_mid_request_leaves_its_commit(main, tmp_path):
    worker = await _attached(main)
    async with WriterGate(main, tmp_path):  # the telemetry writer is held: the append stays queued
        pending = asyncio.create_task(worker.append([_span(9)], span_offsets=[9], consumer="w1"))
        await wait_for_async(lambda: worker.pending_items == 1, 10, what="the request sent")
        await asyncio.sleep(0.1)
        assert not await worker.stop(time.monotonic() + 0.2)  # not answered by then
        with pytest.raises(StoreError):
            await pending
    await wait_for_async(lambda: main.process_pid is not None, 1, what="the store")
    for _ in range(100):
        if await _names(main) == ["s9"]:
            break
        await asyncio.sleep(0.05)
    assert await _names(main) == ["s9"] and await main.rows_through("w1") == 9


async def test_the_daemons_stop_ends_the_store_and_attached_clients_see_it(tmp_path):
    main = DuckDBStore(tmp_path / "w.duckdb")
    await main.start()
    worker = await _attached(main)
    assert (await worker.append([_span(1)])).stored == 1
    # the worker never stops: the store waits for it until the stop's deadline, then stops anyway
    assert await main.stop(deadline=time.monotonic() + 0.5)
    await asyncio.wait_for(worker.lost.wait(), 10)
    assert not worker.accepting and worker.write_failure is not None
    with pytest.raises(StoreError):
        await worker.append([_span(2)])
    with pytest.raises(StoreError):
        await worker.read(len, "x")
    with pytest.raises(StoreError, match="not up"):
        main.attach()
    await worker.stop()


async def test_a_dead_store_process_fails_an_attached_clients_pending_requests(main, tmp_path):
    worker = await _attached(main)
    pid = main.process_pid
    assert pid is not None
    gate = WriterGate(main, tmp_path, timeout_s=5)
    await gate.__aenter__()
    pending = asyncio.create_task(worker.append([_span(1)]))
    await wait_for_async(lambda: worker.pending_items == 1, 10, what="the request sent")
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(StoreError, match="exited"):
        await pending
    await asyncio.wait_for(worker.lost.wait(), 10)
    assert not worker.accepting and worker.write_failure == "the store process exited"
    with pytest.raises(StoreError):
        await gate.__aexit__(None, None, None)
    # the daemon's client starts a new store process; a fresh attach works there
    await wait_for_async(lambda: main.process_pid not in (None, pid) and main.accepting, 20, what="a new store")
    again = await _attached(main)
    assert (await again.append([_span(2)])).stored == 1
    assert await again.stop()
    await worker.stop()


async def test_attach_needs_a_running_store(tmp_path):
    store = DuckDBStore(tmp_path / "w.duckdb")
    with pytest.raises(StoreError, match="not up"):
        store.attach()
    mine, theirs = socket.socketpair()
    theirs.close()
    client = DuckDBStore(tmp_path / "w.duckdb", attach_fd=mine.detach())
    with pytest.raises(StoreError, match="not serving"):
        await client.start()  # no hello on the channel


async def test_feed_state_per_consumer(main):
    assert await main.feed_consumers() == {}
    await main.set_feed_offset(3)
    await main.set_feed_offset(5, consumer="w1")
    assert (await main.feed_offset(), await main.feed_offset("w1"), await main.feed_offset("w2")) == (3, 5, 0)
    await main.append([_span(1), _span(2)], span_offsets=[10, 12], consumer="w1")
    await main.append([_span(3)], span_offsets=[11], consumer="w2")
    await main.append([_span(4)], span_offsets=[4])
    assert await main.rows_through("w1") == 12 and await main.rows_through("w2") == 11
    assert await main.rows_through() == 4  # the unnamed consumer: its own rows
    assert await main.rows_through("w3") is None
    assert await main.feed_consumers() == {"": (3, 4), "w1": (5, 12), "w2": (0, 11)}
    # a mark never goes back, and retention keeps it
    await main.append([_span(5)], span_offsets=[8], consumer="w1")
    assert await main.rows_through("w1") == 12
    await main.prune_span_log(dt.datetime.now(dt.UTC))
    assert await _names(main) == [] and await main.rows_through() == 4
    assert await main.rows_through("w1") == 12


async def test_a_consumers_mark_is_committed_with_its_rows(main):
    # stored without set_feed_offset, then the store process is killed: the mark is exact
    await main.set_feed_offset(1, consumer="w1")
    for i in range(2, 21):
        await main.append([_span(i)], span_offsets=[i], consumer="w1")
    pid = main.process_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    await wait_for_async(
        lambda: main.process_pid not in (None, pid) and main.accepting and main.write_failure is None,
        20,
        what="a new store process",
    )
    assert await main.rows_through("w1") == 20 and await main.feed_offset("w1") == 1
    assert await main.feed_consumers() == {"w1": (1, 20)}


async def test_a_consumers_rows_refused_for_their_values_leave_the_mark_of_those_stored(main):
    bad = Span(
        trace_id=f"{3:032x}",
        span_id=f"{4:016x}",
        parent_span_id=None,
        name="bad",
        kind="internal",
        start_time_unix_nano=2**64,
        end_time_unix_nano=1,
    )
    outcome = await main.append([_span(1), _span(2), bad], span_offsets=[5, 6, 9], consumer="w1")
    assert (outcome.stored, outcome.rejected) == (2, 1)
    assert await main.rows_through("w1") == 6


@pytest.mark.parametrize("workers", [0, 2])
async def test_worker_stores_from_the_factory(main, tmp_path, workers):
    settings = Settings.model_validate({"store": {"path": main.path}, "workers": {"count": workers}})
    sock = main.attach()
    stores = build_worker_stores(settings, Metrics(), attach_fd=sock.detach(), owner="w1")
    client = stores.components[0]
    assert isinstance(client, DuckDBStore) and stores.intake is client and stores.runs is client
    assert len(stores.components) == 1 and stores.leadership is None and stores.lost is client.lost
    # with worker processes the clients of the one store process coordinate through it, as "w1"
    assert stores.coordination is None and client.owner == "w1"  # nothing coordinated between workers
    await client.start()
    try:
        await stores.intake.append([_span(1)], span_offsets=[1], consumer="w1")
        assert await stores.feed.rows_through("w1") == 1
    finally:
        assert await client.stop()
    assert main.accepting


async def test_worker_stores_in_postgres_mode(main, pg_dsn):
    settings = Settings.model_validate(
        {"store": {"path": main.path, "backend": "postgres", "postgres": {"dsn": pg_dsn}}}
    )
    sock = main.attach()
    stores = build_worker_stores(settings, Metrics(), attach_fd=sock.detach(), owner="worker-1")
    local, shared = stores.components  # the span log first: it keeps the instance id
    assert isinstance(local, DuckDBStore) and stores.intake is local and stores.span_log is local
    assert stores.runs is shared and stores.coordination is shared and stores.leadership is not None
    for component in stores.components:
        await component.start()
    try:
        assert (await stores.intake.append([_span(1)], span_offsets=[1], consumer="w1")).stored == 1
        assert getattr(shared, "instance_id", None) == await main.instance_id()  # the daemon's span log
        assert stores.health.accepting
    finally:
        for component in reversed(stores.components):
            await component.stop()
    assert main.accepting


class _Commits:
    """A client's commit observer: the spans of each commit it was told of."""

    def __init__(self) -> None:
        self.spans: list[int] = []

    def on_commit(self, seconds: float, spans: int, logs: int) -> None:
        self.spans.append(spans)

    def on_checkpoint(self, database: str, seconds: float) -> None:
        pass

    def on_error(self, error: BaseException) -> None:
        pass


async def test_a_commit_of_jobs_of_several_clients_is_told_to_one_of_them(tmp_path):
    """Each process counts the commits it is told of and the daemon's /metrics sums the counts: a
    group commit of the daemon's and a worker's jobs is counted once, not once per client."""
    told_main, told_worker = _Commits(), _Commits()
    main = DuckDBStore(tmp_path / "w.duckdb", max_batch_items=100, observer=told_main)
    await main.start()
    try:
        worker = DuckDBStore(main.path, attach_fd=main.attach().detach(), observer=told_worker)
        await worker.start()
        try:
            async with WriterGate(main, tmp_path) as gate:
                appends = asyncio.gather(
                    main.append([_span(1)], span_offsets=[1]),
                    worker.append([_span(2)], span_offsets=[2], consumer="w1"),
                )
                await asyncio.sleep(0.5)  # both queued behind the held writer: one group commit
                gate.open()
                assert [o.stored for o in await appends] == [1, 1]
        finally:
            assert await worker.stop()
    finally:
        await main.stop()
    assert sum(told_main.spans) + sum(told_worker.spans) == 2, (told_main.spans, told_worker.spans)
