"""Conversation idling is measured by the App's clock: an App on the test's loop and a clock the
test moves score a conversation once the clock passed ``assembly.conversation_idle_s`` after its
last turn, and not a moment before; no real waiting."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from support.clock import ManualClock
from support.daemon import config_dict, running_app, wait_for_async
from support.db import fetch
from support.otlp import agent_trace, span_exporter, tracer

from tracescorer.config import Settings

IDLE_S = 600.0
WHOLE = "SELECT count(*) FROM scores WHERE scorer_id = 'whole'"


async def test_a_conversation_is_scored_once_the_apps_clock_passed_its_idle_time(tmp_path: Path) -> None:
    clock = ManualClock()
    cfg = config_dict(
        tmp_path,
        workers={"count": 0},
        assembly={"idle_s": 0.2, "conversation_idle_s": IDLE_S},
        scorers=[
            {"id": "turn", "prebuilt": "non_empty_response"},
            {"id": "whole", "prebuilt": "non_empty_response", "scope": "conversation"},
        ],
    )
    async with running_app(Settings.model_validate(cfg), clock) as app:

        def send() -> None:
            with tracer(span_exporter("http", http_url=f"http://127.0.0.1:{app.http_port}")) as t:
                agent_trace(t, answer="first")  # both turns of conversation conv-1
                agent_trace(t, answer="second")

        await asyncio.to_thread(send)

        async def turns() -> Any:
            clock.advance(0.1)  # assembly.idle_s passes on the same clock
            [(n,)] = await fetch(app.stores.queries, "SELECT count(*) FROM scores WHERE scorer_id = 'turn'")
            return n == 2

        await wait_for_async(turns, 60, interval_s=0.05, what="both turns scored")
        idle = app.pipeline.conversations if app.pipeline is not None else None
        assert idle is not None
        clock.advance(IDLE_S - 5)  # not idle yet: a few idle passes leave it alone
        for _ in range(3):
            await idle.tick()  # type: ignore[attr-defined]
        assert await fetch(app.stores.queries, WHOLE) == [(0,)]
        clock.advance(10)

        async def scored() -> bool:
            return await fetch(app.stores.queries, WHOLE) == [(1,)]

        await wait_for_async(scored, 30, interval_s=0.05, what="the conversation score")
