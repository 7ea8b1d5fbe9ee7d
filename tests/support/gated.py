"""A code scorer that waits until a test opens its gate: holds the scoring stage full on purpose."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from tracescorer import create_scorer

GATE = threading.Event()  # a threading.Event: tests run on different event loops
STARTED = threading.Event()  # set once a run waits at the gate


async def _score(*, run: Any, results: Any) -> float:
    STARTED.set()
    while not GATE.is_set():
        await asyncio.sleep(0.01)
    return 1.0


scorer = create_scorer(id="gated", description="scores 1 once the gate opens").generate_score(_score)
