"""Which rows are new: the hints that let the DuckDB store insert rows without looking their keys up.

The assembly stage says which traces it assembles for the first time. Their runs are new, and so
are the score and decision rows a live run scorer writes for those runs (ids are derived from the
scorer and the run). A bounded memory of such traces, on the daemon side of the store, turns that
into per-row hints; a trace assembled again (late items) is forgotten, so its re-scores replace.
A wrong hint costs a retry in the store process, never a row (:func:`tracescorer.store.duckdb.ops.hinted`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from tracescorer.records.scores import DecisionRecord, ScoreRecord

#: Traces remembered (~170 B each: ~16 MB): a minute of first assemblies at the highest sustained
#: rate measured; live scores are written seconds after assembly, later ones are looked up.
LIMIT = 100_000


class NewTraces:
    """Traces recently assembled for the first time (the oldest forgotten beyond ``limit``)."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._limit = limit
        self._traces: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, trace_id: str) -> bool:
        return trace_id in self._traces

    def assembled(self, new: Iterable[str], again: Iterable[str]) -> None:
        """``new``: traces assembled for the first time; ``again``: traces assembled before."""
        for trace_id in again:
            self._traces.pop(trace_id, None)
        for trace_id in new:
            self._traces[trace_id] = None
        while len(self._traces) > self._limit:
            self._traces.popitem(last=False)

    def score(self, record: ScoreRecord) -> bool:
        """Whether ``record`` is the first score of its (scorer, run) pair."""
        return record.source == "live" and record.entity_type == "agent" and record.trace_id in self._traces

    def decision(self, record: DecisionRecord) -> bool:
        return record.source == "live" and record.target_type == "run" and record.trace_id in self._traces
