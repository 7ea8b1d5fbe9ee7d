"""Which judge and which reference: naming them, and reading their verdicts through a query function.

A **judge** is a tracescorer scorer id (its ok scores), or ``external:<name>``: another tool's
evaluator, its ``gen_ai.evaluation.result`` events with that ``gen_ai.evaluation.name``. A plain
id that has no scores but external evaluations is read as the evaluator of that name. The
**reference** is ``labels`` (the human labels given for the judge's id, the default), or another
judge (``scorer:<id>``, ``external:<name>``).

The query function is synchronous here (``(query, max_rows) -> {columns, rows, truncated}``, what
the read commands and the report use); the daemon's gauges run the same queries on its store.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracescorer.calibration import agreement
from tracescorer.store import label_queries
from tracescorer.store.queries import Query

RunQuery = Callable[[Query, int], dict[str, Any]]
LABELS = "labels"
EXTERNAL, SCORER = "external", "scorer"
MAX_ROWS = 100_000  # asked for; the store's query_max_rows caps it (and the caller says so)


class SourceError(ValueError):
    """A judge or reference that cannot be read (the message says why)."""


@dataclass(frozen=True, slots=True)
class Judge:
    """A tracescorer scorer (``kind='scorer'``) or an external evaluator (``kind='external'``)."""

    kind: str
    id: str

    def __str__(self) -> str:
        return self.id if self.kind == SCORER else f"{EXTERNAL}:{self.id}"

    def query(self, since: dt.datetime | None) -> Query:
        if self.kind == SCORER:
            return label_queries.judge_scores(self.id, since)
        return label_queries.judge_evaluations(self.id, since)


def parse_judge(text: str) -> Judge:
    kind, sep, rest = text.partition(":")
    if sep and kind in (EXTERNAL, SCORER) and rest:
        return Judge(kind, rest)
    if not text.strip():
        raise SourceError("a judge id is empty")
    return Judge(SCORER, text.strip())


def parse_reference(text: str) -> Judge | None:
    """None for human labels, else the reference judge."""
    if text == LABELS:
        return None
    kind, sep, rest = text.partition(":")
    if not (sep and kind in (EXTERNAL, SCORER) and rest):
        raise SourceError(f"reference {text!r}: use labels, scorer:<id> or external:<name>")
    return Judge(kind, rest)


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(result["columns"], row, strict=False)) for row in result["rows"]]


def _read(query: RunQuery, q: Query, what: str) -> list[dict[str, Any]]:
    result = query(q, MAX_ROWS)
    if result.get("truncated"):
        raise SourceError(f"{what}: more rows than store.query_max_rows; narrow it with --since or raise the limit")
    return rows(result)


def judge_verdicts(query: RunQuery, judge: Judge, since: dt.datetime | None) -> tuple[Judge, list[agreement.Verdict]]:
    """The judge's verdicts (a plain id without scores falls back to the external evaluator of
    that name) and the judge they were read as."""
    found = agreement.verdicts(_read(query, judge.query(since), f"scores of {judge}"))
    if not found and judge.kind == SCORER:
        external = Judge(EXTERNAL, judge.id)
        other = agreement.verdicts(_read(query, external.query(since), f"evaluations {judge.id}"))
        if other:
            return external, other
    return judge, found


def reference_for(
    query: RunQuery, judge: Judge, reference: Judge | None, since: dt.datetime | None
) -> dict[agreement.Key, agreement.Reference]:
    """What the reference says per target (human labels are read whatever their age)."""
    if reference is None:
        return agreement.references_from_labels(
            _read(query, label_queries.labels_for(judge.id), f"labels of {judge.id}")
        )
    _, found = judge_verdicts(query, reference, since)
    return agreement.references_from_verdicts(found)


def reference_name(reference: Judge | None) -> str:
    return LABELS if reference is None else str(reference)


def load_pairs(
    query: RunQuery, judge: Judge, reference: Judge | None, since: dt.datetime | None
) -> tuple[Judge, list[agreement.Verdict], list[agreement.Pair]]:
    """The judge (as read), its verdicts, and those paired with the reference."""
    judge, verdicts = judge_verdicts(query, judge, since)
    return judge, verdicts, agreement.pair(verdicts, reference_for(query, judge, reference, since))


def labelled_ids(query: RunQuery) -> list[str]:
    """Every id that has human labels."""
    return [str(r["scorer_id"]) for r in _read(query, label_queries.labelled_scorers(), "labelled scorers")]
