"""The healer and a check whose read ran beside the commit of a re-score: the read may return the
old error row (due), though the re-score's row is stored by the time the check looks at it. The
target is not judged again (a loaded machine judged it twice: the heal test saw a 4th request)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from support.agent_runs import make_run

from tracescorer.config import HealSettings
from tracescorer.metrics import Metrics
from tracescorer.model import AgentRun
from tracescorer.runner.decider import Decision
from tracescorer.runner.heal import Healer
from tracescorer.store.api import HealCandidate

DUE = HealCandidate(score_id="s1", scorer_id="judge", target_type="run", target_id="run-1", heal_attempts=1)


class Runner:
    """What the healer uses of a ScoringRunner: the store's reads, decide, the writer's commits."""

    def __init__(self) -> None:
        self.bindings = [SimpleNamespace(binding=SimpleNamespace(id="judge"), uses_judge=True)]
        self.budget = SimpleNamespace(exhausted=False)
        self.queue_capacity = 100
        self.caps = SimpleNamespace(budget_refusal=lambda scorer_id: None)
        self.decided: list[str] = []
        self.commit: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.read_started = asyncio.Event()
        self.read_may_answer = asyncio.Event()
        self.read_may_answer.set()
        self.scores = SimpleNamespace(heal_candidates=self._heal_candidates)
        self.runs = SimpleNamespace(load_runs=self._load_runs)
        self.writer = SimpleNamespace(committed=lambda: self.commit)

    def backlog(self) -> str | None:
        return None

    async def _heal_candidates(
        self, scorer_ids: list[str], policy: Any, *, now: float, limit: int
    ) -> list[HealCandidate]:
        self.read_started.set()
        await self.read_may_answer.wait()
        return [DUE]  # the row as the read saw it: still an error, due

    async def _load_runs(self, run_ids: list[str]) -> list[AgentRun]:
        return [make_run(run_id=run_ids[0])]

    def decide(self, bound: Any, target: Any, source: str, heal_attempt: int) -> asyncio.Future[Decision]:
        self.decided.append(target.id)
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        future.set_result(Decision.SCORED)
        return future


async def test_a_re_score_committed_while_a_check_reads_is_not_judged_again() -> None:
    runner = Runner()
    healer = Healer(runner, HealSettings(), Metrics())  # type: ignore[arg-type]
    assert await healer.heal_once() == 1 and runner.decided == ["run-1"]
    await asyncio.sleep(0)  # the re-score decided; its row not committed yet: in flight
    assert await healer.heal_once() == 0

    # the next check's read runs while the row is committed, and answers the old row after
    runner.read_may_answer.clear()
    check = asyncio.create_task(healer.heal_once())
    await runner.read_started.wait()
    runner.commit.set_result(None)
    await asyncio.sleep(0)
    runner.read_may_answer.set()
    assert await check == 0 and runner.decided == ["run-1"]

    # a read that starts after the commit sees the stored row (here: still due, so judged again)
    assert await healer.heal_once() == 1 and runner.decided == ["run-1", "run-1"]
