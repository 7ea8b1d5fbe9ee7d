"""What the daemon's main process and its worker processes tell each other (framed pickles over a
socketpair, :mod:`tracescorer.ipc`): a message is ``(kind, value)``.

main → worker: ``START`` (:class:`Start`, first), ``END`` (``(end offset, synced at)``: the segment
log is synced up to there), ``SNAPSHOT`` (tell your metrics now: ``/metrics`` is being scraped),
``TURNS`` (conversation ids this worker owns that got a run stored, by any worker), ``RELOAD``
(its share of a reloaded configuration: it rebinds its scorers and sets its log level;
:mod:`tracescorer.daemon.reload`), ``STOP`` (seconds left to drain).
worker → main: ``READY`` and ``PROGRESS`` (:class:`Progress`), ``SCORES`` (committed score rows,
for the daemon's exporter, monitors and score metrics), ``DECISIONS`` (committed decision rows,
for its coverage monitors; sent only when one is configured), ``EVALUATIONS`` (other tools' evaluations
were stored: the daemon's agreement gauges are computed again soon), ``TURNS`` (conversation ids
that got a run stored here: the main process tells each conversation's owner), ``METRICS`` (``(feed offset,
snapshot)``: its metrics as of that offset),
``RELOADED`` (None once a ``RELOAD`` is applied, else why not), ``STOPPED`` (whether it drained).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracescorer.config import Settings

START, END, SNAPSHOT, STOP = "start", "end", "snapshot", "stop"
READY, PROGRESS, SCORES, METRICS, STOPPED = "ready", "progress", "scores", "metrics", "stopped"
EVALUATIONS, TURNS, DECISIONS = "evaluations", "turns", "decisions"
RELOAD, RELOADED = "reload", "reloaded"

#: a worker's exit status when its store connection was lost (the store process restarts): the
#: main process starts it again with a new connection
EXIT_STORE_LOST = 3


@dataclass(frozen=True, slots=True)
class Start:
    """What a worker needs to start: its settings, its name in claims, where the log is and how
    far it is synced, how to log."""

    settings: Settings
    owner: str
    log_dir: str
    end: int
    log_level: str
    log_format: str


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a worker's feed is: every request before ``offset`` handled; records before
    ``keep_from`` no longer needed (the main process deletes segments every worker passed);
    ``write_failure``: why the store's writes fail, as the worker's own channel was last told
    (the daemon's readiness: its own channel may not write for a long while); ``pending_items``:
    items in its store channel's write queue (bounded by ``receiver.max_queue_items``)."""

    offset: int
    keep_from: int
    lag_s: float
    held_by: str | None
    failure: str | None
    write_failure: str | None = None
    pending_items: int = 0
