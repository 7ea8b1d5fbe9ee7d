"""Which judge and which reference: naming them, and reading their verdicts through the store's reads.

A **judge** is a tracescorer scorer id (its ok scores), or ``external:<name>``: another tool's
evaluator, its ``gen_ai.evaluation.result`` events with that ``gen_ai.evaluation.name``. A plain
id that has no scores but external evaluations is read as the evaluator of that name. The
**reference** is ``labels`` (the human labels given for the judge's id, the default), or another
judge (``scorer:<id>``, ``external:<name>``).

The reads are the store's typed ones (:class:`~tracescorer.store.api.ReadStore`: the read commands
and the report through the daemon or on the store, the daemon's gauges on its store), every row
however many: against the labels only the judge's verdicts on labelled targets are read (the
pairing is done in SQL), so a judge's rows are bounded by the labels given, not by its scores.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from tracescorer.calibration import agreement
from tracescorer.store.api import QueryResult, ReadStore

LABELS = "labels"
EXTERNAL, SCORER = "external", "scorer"


class SourceError(ValueError):
    """A judge or reference that cannot be read (the message says why)."""


@dataclass(frozen=True, slots=True)
class Judge:
    """A tracescorer scorer (``kind='scorer'``) or an external evaluator (``kind='external'``)."""

    kind: str
    id: str

    def __str__(self) -> str:
        return self.id if self.kind == SCORER else f"{EXTERNAL}:{self.id}"

    async def read(self, reads: ReadStore, since: dt.datetime | None, *, labelled: bool = False) -> QueryResult:
        """Its verdicts' rows (``labelled``: on the targets labelled for its id only)."""
        if self.kind == SCORER:
            return await reads.judge_scores(self.id, since, labelled)
        return await reads.judge_evaluations(self.id, since, labelled)


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


async def judge_verdicts(
    reads: ReadStore, judge: Judge, since: dt.datetime | None, *, labelled: bool = False
) -> tuple[Judge, list[agreement.Verdict]]:
    """The judge's verdicts (``labelled``: on labelled targets only) and the judge they were read
    as: a plain id without scores falls back to the external evaluator of that name."""
    found = agreement.verdicts((await judge.read(reads, since, labelled=labelled)).dicts())
    if not found and judge.kind == SCORER and not (labelled and await _has_scores(reads, judge.id)):
        external = Judge(EXTERNAL, judge.id)
        other = agreement.verdicts((await external.read(reads, since, labelled=labelled)).dicts())
        if other:
            return external, other
    return judge, found


async def _has_scores(reads: ReadStore, scorer_id: str) -> bool:
    return bool((await reads.scorer_has_scores(scorer_id)).rows[0][0])


async def reference_for(
    reads: ReadStore, judge: Judge, reference: Judge | None, since: dt.datetime | None
) -> dict[agreement.Key, agreement.Reference]:
    """What the reference says per target (human labels are read whatever their age)."""
    if reference is None:
        return agreement.references_from_labels((await reads.labels_for(judge.id)).dicts())
    _, found = await judge_verdicts(reads, reference, since)
    return agreement.references_from_verdicts(found)


def reference_name(reference: Judge | None) -> str:
    return LABELS if reference is None else str(reference)


async def load_pairs(
    reads: ReadStore, judge: Judge, reference: Judge | None, since: dt.datetime | None
) -> tuple[Judge, list[agreement.Verdict], list[agreement.Pair]]:
    """The judge (as read), its verdicts (against the labels: on labelled targets only), and
    those paired with the reference."""
    judge, verdicts = await judge_verdicts(reads, judge, since, labelled=reference is None)
    return judge, verdicts, agreement.pair(verdicts, await reference_for(reads, judge, reference, since))


async def labelled_ids(reads: ReadStore) -> list[str]:
    """Every id that has human labels."""
    return [str(r["scorer_id"]) for r in (await reads.labelled_scorers()).dicts()]
