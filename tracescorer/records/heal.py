"""The heal policy the healer and the store's ``heal_candidates`` query share
(:mod:`tracescorer.runner.heal_policy` has the rest of it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracescorer.config import HealSettings


@dataclass(frozen=True, kw_only=True, slots=True)
class HealPolicy:
    """``max_attempts`` re-scores per error score, the first ``initial_backoff_s`` after the
    failure, each wait doubling up to ``max_backoff_s``; none once the failure is older than
    ``max_age_s`` (see ``scoring.heal`` in the configuration)."""

    max_attempts: int = 5
    max_age_s: float = 86_400.0
    initial_backoff_s: float = 30.0
    max_backoff_s: float = 600.0

    @classmethod
    def of(cls, settings: HealSettings) -> HealPolicy:
        """The policy of ``scoring.heal``."""
        return cls(
            max_attempts=settings.max_attempts,
            max_age_s=settings.max_age_s,
            initial_backoff_s=settings.initial_backoff_s,
            max_backoff_s=settings.max_backoff_s,
        )

    def query_args(self) -> tuple[int, float, float, float]:
        """``max_attempts``, ``max_age_s``, ``initial_backoff_s``, ``max_backoff_s``: the
        parameters of the stores' ``heal_candidates`` SQL, in that order."""
        return self.max_attempts, float(self.max_age_s), float(self.initial_backoff_s), float(self.max_backoff_s)

    def backoff_s(self, attempts: int) -> float:
        """The wait after a failure of a score already re-scored ``attempts`` times. The stores'
        ``heal_candidates`` SQL computes it again (``least(initial * 2^attempts, max)``): its LIMIT
        picks among the rows already due."""
        return float(min(self.initial_backoff_s * 2 ** max(0, attempts), self.max_backoff_s))
