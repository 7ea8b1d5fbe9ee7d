"""The score writer's stop never sends a write again whose outcome it does not know: a write in flight
when the stop cancels the writer task is waited for, not sent a second time (the store committed
both: every such row written twice, exported twice), and one still unanswered at the deadline is
left to the store. A failure whose message is empty is logged by its type."""

from __future__ import annotations

import asyncio
import logging

from support.daemon import wait_for_async
from support.records import decision_row, score_row

import tracescorer.runner.writer as writer_module
from tracescorer.records.scores import DecisionRecord, ScoreRecord
from tracescorer.runner.writer import ScoreWriter


class _Store:
    """Counts the writes sent; each waits at ``gate`` (the store's commit), then fails with
    ``errors`` first, if any."""

    def __init__(self) -> None:
        self.sent: list[list[str]] = []
        self.stored: list[str] = []
        self.gate = asyncio.Event()
        self.errors: list[Exception] = []

    async def write_scores(self, scores: list[ScoreRecord], decisions: list[DecisionRecord]) -> None:
        self.sent.append([s.id for s in scores])
        await self.gate.wait()
        if self.errors:
            raise self.errors.pop(0)
        self.stored += [s.id for s in scores]


def _rows(i: int) -> tuple[DecisionRecord, ScoreRecord]:
    return decision_row(i, score_id=f"s{i}"), score_row(i)


async def _in_flight(store: _Store) -> ScoreWriter:
    """A writer whose task sent one batch (s1), not answered yet, with another row (s2) pending."""
    writer = ScoreWriter(store)  # type: ignore[arg-type]
    writer.start()
    writer.add(*_rows(1))
    await wait_for_async(lambda: store.sent, 5, what="the first write sent")
    writer.add(*_rows(2))
    return writer


async def test_a_stop_waits_for_the_write_in_flight_and_sends_only_what_was_not_sent():
    store = _Store()
    writer = await _in_flight(store)
    committed = writer.committed()
    closing = asyncio.create_task(writer.close(5))
    await asyncio.sleep(0)  # the writer task is cancelled while its write waits for the store
    store.gate.set()
    assert await closing
    assert store.sent == [["s1"], ["s2"]] and store.stored == ["s1", "s2"]
    assert committed.done() and writer.waiting == 0


async def test_a_write_unanswered_at_the_deadline_is_not_sent_again(caplog):
    store = _Store()
    writer = await _in_flight(store)
    with caplog.at_level(logging.WARNING, logger="tracescorer.runner.writer"):
        assert not await writer.close(0.2)
    messages = [r.getMessage() for r in caplog.records]
    assert store.sent == [["s1"]], messages  # s2 waits behind s1: a write at a time, in order
    assert any("2 score/decision row(s) sent to the store were not answered" in m for m in messages), messages
    assert any("2 score/decision row(s) not stored before the deadline" in m for m in messages), messages
    assert not any("failed" in m for m in messages), messages  # the deadline is no failure
    store.gate.set()  # the store commits what it was sent
    await wait_for_async(lambda: store.stored == ["s1"], 5, what="the write in flight answered")
    assert store.sent == [["s1"]]


async def test_a_failure_without_a_message_is_logged_by_its_type(monkeypatch, caplog):
    monkeypatch.setattr(writer_module, "RETRY_S", 0.01)
    store = _Store()
    store.errors = [TimeoutError()]
    store.gate.set()
    writer = ScoreWriter(store)  # type: ignore[arg-type]
    writer.add(*_rows(1))
    with caplog.at_level(logging.WARNING, logger="tracescorer.runner.writer"):
        assert await writer.close(5)
    messages = [r.getMessage() for r in caplog.records]
    assert "storing the last scores failed: TimeoutError" in messages, messages
    assert store.sent == [["s1"], ["s1"]] and store.stored == ["s1"]  # a failed write is sent again
