"""The rows the workers committed, told to the main process's listeners (its exporter, monitors
and score metrics): a listener that fails is logged and never stops the pool."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from tracescorer.records.scores import DecisionRecord, ScoreRecord
from tracescorer.runner.writer import DecisionListener, ScoreListener

log = logging.getLogger("tracescorer.workers.pool")


def tell_scores(listeners: Sequence[ScoreListener], scores: Sequence[ScoreRecord]) -> None:
    """Committed score rows, to every listener."""
    for listener in listeners:
        try:
            listener.on_scores(scores)
        except Exception:  # a listener must never stop the pool
            log.exception("score listener %r failed", listener)


def tell_decisions(listeners: Sequence[ScoreListener], decisions: Sequence[DecisionRecord]) -> None:
    """Committed decision rows, to the listeners that take them (coverage monitors)."""
    for listener in listeners:
        try:
            if isinstance(listener, DecisionListener):
                listener.on_decisions(decisions)
        except Exception:  # a listener must never stop the pool
            log.exception("decision listener %r failed", listener)
