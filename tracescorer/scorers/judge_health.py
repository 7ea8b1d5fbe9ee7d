"""Failure streaks of judge models, for the log: one line when a model starts failing, one when
it answers again (with the count and the kinds of failures in between), and a reminder every
``remind_s`` while it keeps failing: a judge outage neither floods the log nor goes unnoticed.

A failure is a request the provider did not answer (timeout, connection refused, 429, 5xx,
authentication...); a reply that does not parse is an answer.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from tracescorer.scorers.retry import status_code_of

REMIND_S = 900.0


def failure_kind(error: BaseException) -> str:
    """``RateLimitError (429)``, ``Timeout``: the exception class and the HTTP status, if any."""
    status = status_code_of(error)
    return f"{type(error).__name__} ({status})" if status is not None else type(error).__name__


def _kinds(counts: Counter[str]) -> str:
    return ", ".join(f"{kind} x{n}" for kind, n in counts.most_common())


@dataclass(slots=True)
class _Streak:
    started: float
    reminded: float
    count: int = 0
    kinds: Counter[str] = field(default_factory=Counter)


class FailureStreaks:
    """Per judge model: logs the start and the end of each run of failed requests.

    Called on the event loop (not thread-safe); ``failed`` after each request the provider did
    not answer, ``answered`` after each reply.
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        remind_s: float = REMIND_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self._remind_s = remind_s
        self._clock = clock
        self._streaks: dict[str, _Streak] = {}

    def failing(self, model: str) -> int:
        """Failed requests to ``model`` since it last answered."""
        streak = self._streaks.get(model)
        return streak.count if streak is not None else 0

    def failed(self, model: str, error: BaseException) -> None:
        now = self._clock()
        kind = failure_kind(error)
        streak = self._streaks.get(model)
        if streak is None:
            streak = self._streaks[model] = _Streak(started=now, reminded=now)
            streak.count, streak.kinds[kind] = 1, 1
            self._log.warning(
                "judge %s is failing: %s: %s (logged once; failures are counted until it answers again)",
                model,
                kind,
                str(error).strip().splitlines()[0][:300] if str(error).strip() else "no message",
            )
            return
        streak.count += 1
        streak.kinds[kind] += 1
        if now - streak.reminded >= self._remind_s:
            streak.reminded = now
            self._log.warning(
                "judge %s still failing: %d failed request(s) in %.0fs (%s)",
                model,
                streak.count,
                now - streak.started,
                _kinds(streak.kinds),
            )

    def answered(self, model: str) -> None:
        streak = self._streaks.pop(model, None)
        if streak is None:
            return
        self._log.warning(
            "judge %s answering again after %d failed request(s) in %.0fs (%s)",
            model,
            streak.count,
            self._clock() - streak.started,
            _kinds(streak.kinds),
        )
