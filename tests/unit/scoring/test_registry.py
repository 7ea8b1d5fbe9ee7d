"""ScorerRegistry and the persistence rule."""

from __future__ import annotations

import logging

import pytest

from tracescorer import ScorerRegistry, ScorerRun, create_scorer
from tracescorer.scorers import InMemoryScoreSink, ScorerLike, ScoreSink


def scorer(id: str) -> object:
    return create_scorer(id=id, description="d").generate_score(lambda *, run, results: 1)


def test_register_and_get() -> None:
    reg = ScorerRegistry()
    s = scorer("a")
    reg.register(s)  # type: ignore[arg-type]
    assert reg.get_scorer_by_id("a") is s
    assert reg.get_scorer_by_id("b") is None
    assert "a" in reg and len(reg) == 1 and list(reg) == [s]
    reg.register(s)  # type: ignore[arg-type]  # same instance again is fine
    with pytest.raises(ValueError, match="already registered"):
        reg.register(scorer("a"))  # type: ignore[arg-type]
    reg.register(scorer("a"), replace=True)  # type: ignore[arg-type]
    assert isinstance(s, ScorerLike)
    assert isinstance(InMemoryScoreSink(), ScoreSink)


async def test_persist_only_registered(caplog: pytest.LogCaptureFixture) -> None:
    registered = scorer("multi-turn-judge-scorer")
    stray = scorer("not-registered-scorer")
    reg = ScorerRegistry()
    reg.register(registered)  # type: ignore[arg-type]
    sink = InMemoryScoreSink()
    ok = await registered.run(ScorerRun(output="x", run_id="r1"))  # type: ignore[attr-defined]
    lost = await stray.run(ScorerRun(output="x", run_id="r2"))  # type: ignore[attr-defined]
    assert await reg.persist(ok, sink) is True
    with caplog.at_level(logging.WARNING, logger="tracescorer.scorers.registry"):
        assert await reg.persist(lost, sink) is False
    assert sink.scores == [ok]
    assert sink.saved[0][1] is registered
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "not-registered-scorer" in warnings[0].getMessage()
