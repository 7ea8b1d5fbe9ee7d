"""``ScorerRegistry`` and the ``ScoreSink`` Protocol scores are persisted through.

Persistence follows the seed's rule: a score is stored only when a scorer with the same id is
registered (metadata is resolved by id); otherwise a warning names the id and nothing is stored.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from tracescorer.scorers.types import ScorerLike, ScorerResult

log = logging.getLogger(__name__)


@runtime_checkable
class ScoreSink(Protocol):
    """Where scores are stored (the daemon's DuckDB store implements it).

    ``save_score`` is a coroutine called on the event loop; it gets the result and the
    registered scorer it belongs to, and returns once the score is durably accepted. It raises
    on failure (the caller decides whether to retry).
    """

    async def save_score(self, result: ScorerResult, scorer: ScorerLike) -> None: ...


class InMemoryScoreSink:
    """A :class:`ScoreSink` keeping ``(result, scorer)`` pairs in a list (tests, notebooks)."""

    def __init__(self) -> None:
        self.saved: list[tuple[ScorerResult, ScorerLike]] = []

    async def save_score(self, result: ScorerResult, scorer: ScorerLike) -> None:
        self.saved.append((result, scorer))

    @property
    def scores(self) -> list[ScorerResult]:
        return [result for result, _ in self.saved]


class ScorerRegistry:
    """Scorers by id. Only registered scorers' results are persisted.

    Not thread-safe for registration; register at start-up, then read from anywhere.
    """

    def __init__(self, scorers: dict[str, ScorerLike] | None = None) -> None:
        self._scorers: dict[str, ScorerLike] = {}
        for scorer in (scorers or {}).values():
            self.register(scorer)

    def register(self, scorer: ScorerLike, *, replace: bool = False) -> ScorerLike:
        """Register ``scorer`` under its id (ValueError on a duplicate unless ``replace``)."""
        if not replace and scorer.id in self._scorers and self._scorers[scorer.id] is not scorer:
            raise ValueError(f"a scorer with id {scorer.id!r} is already registered")
        self._scorers[scorer.id] = scorer
        return scorer

    def get_scorer_by_id(self, scorer_id: str) -> ScorerLike | None:
        """The registered scorer with this id, or ``None``."""
        return self._scorers.get(scorer_id)

    def __contains__(self, scorer_id: object) -> bool:
        return scorer_id in self._scorers

    def __iter__(self) -> Iterator[ScorerLike]:
        return iter(list(self._scorers.values()))

    def __len__(self) -> int:
        return len(self._scorers)

    async def persist(self, result: ScorerResult, sink: ScoreSink) -> bool:
        """Store ``result`` through ``sink`` if its scorer id is registered.

        Returns True when stored. An unregistered id logs a warning naming it and stores
        nothing (returns False).
        """
        scorer = self.get_scorer_by_id(result.scorer_id)
        if scorer is None:
            log.warning(
                "scorer %r is not registered: its score for run %s was not stored "
                "(register a scorer with this id to persist its scores)",
                result.scorer_id,
                result.run_id,
            )
            return False
        await sink.save_score(result, scorer)
        return True
