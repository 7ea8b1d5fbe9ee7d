"""What a caller running scorers (the daemon's runner) says about each judge request: whether an
earlier verdict answers it, and whether it may be sent now.

A caller sets a :class:`JudgeSession` in :data:`SESSION` around one scorer run; the judge
(:mod:`tracescorer.scorers.judge`) then, for every request, computes :func:`request_key` (a hash
of exactly what would be sent: model, messages after the input processors, structured-output
format, options other than the connection ones), asks :meth:`JudgeSession.stored` for an earlier
verdict of that key, and only when there is none calls :meth:`JudgeSession.admit` (limits, budget)
and the model, then tells :meth:`JudgeSession.judged` the model's reply. Without a session (a
library user's ``scorer.run``) every request goes to the model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from tracescorer.scorers.judge_config import CONNECTION_OPTIONS

__all__ = ["SESSION", "JudgeSession", "Verdict", "request_key"]

# litellm's own retries are always off: not part of what is asked
_NOT_ASKED = CONNECTION_OPTIONS | {"num_retries", "max_retries"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    """An earlier reply of the judge to the same request: the model's text (before the output
    processors, which run again on it) and where it was first judged (a score id)."""

    text: str
    origin: str


class JudgeSession(Protocol):
    """A caller's part in one scorer run's judge requests; called on the event loop.

    ``stored`` returns a reusable verdict or None (it must not raise: a failed lookup is a miss);
    ``admit`` is awaited before the run's first request that goes to a model (it may wait for a
    rate limit, or raise to refuse the run: the exception ends the run as the step's failure);
    ``judged`` is told each reply a model gave (text before the output processors) once it
    parsed and validated.
    """

    async def stored(self, key: str) -> Verdict | None: ...

    async def admit(self) -> None: ...

    def judged(self, key: str, model: str, text: str) -> None: ...


SESSION: ContextVar[JudgeSession | None] = ContextVar("tracescorer_judge_session", default=None)


def request_key(model: str, messages: Sequence[Mapping[str, Any]], options: Mapping[str, Any]) -> str:
    """The hash of a judge request as sent: ``model``, ``messages`` and the options that reach the
    provider (``response_format``, ``temperature``...), without the connection options."""
    asked = {k: v for k, v in options.items() if k not in _NOT_ASKED}
    text = json.dumps({"model": model, "messages": messages, "options": asked}, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:32]
