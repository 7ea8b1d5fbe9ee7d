"""The DuckDB store's calibration part: human labels and other tools' evaluations.

Labels are few and precious: a label replaces the stored one of the same id (target, scorer,
person) only when it is at least as recent. Evaluations arrive with telemetry and are upserted by
id like scores. Both tables are declared in :mod:`tracescorer.store.tables`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracescorer.records.labels import EvaluationRecord, LabelRecord
from tracescorer.store.duckdb.jobs import Jobs, Row, coalescable
from tracescorer.store.duckdb.upsert import chunks, key_in, upsert
from tracescorer.store.labels import (
    EVALUATION_FIELDS,
    LABEL_FIELDS,
    evaluation_values,
    label_values,
    newest_first_wins,
)

_LABELED_AT = LABEL_FIELDS.index("labelled_at")


class LabelsPart(Jobs):
    """:class:`~tracescorer.store.api.LabelStore` and :class:`~tracescorer.store.api.EvaluationStore`
    on the store process."""

    async def write_labels(self, labels: Sequence[LabelRecord]) -> int:
        if not labels:
            return 0
        return await self.write(write_labels, [label_values(r) for r in newest_first_wins(labels)])

    async def write_evaluations(self, evaluations: Sequence[EvaluationRecord]) -> None:
        if evaluations:
            await self.write(write_evaluations, [evaluation_values(e) for e in evaluations])


# --- run in the store process ------------------------------------------------------------------------


def write_labels(con: Any, rows: Sequence[Row]) -> int:
    """Upsert labels (``LABEL_FIELDS`` order, one per id) unless the stored one is newer."""
    stored: dict[str, float] = {}
    for part in chunks([r[0] for r in rows]):
        found = con.execute(f"SELECT id, epoch(labelled_at) FROM labels WHERE {key_in('id', len(part))}", part)
        stored.update({k: float(t) for k, t in found.fetchall()})
    fresh = [r for r in rows if r[0] not in stored or float(r[_LABELED_AT]) >= stored[r[0]]]
    upsert(
        con,
        "labels",
        LABEL_FIELDS,
        "id",
        fresh,
        expressions={"labelled_at": "to_timestamp({})"},
        stamps={"created_at": "now()", "updated_at": "now()"},
        keep=("created_at",),
    )
    return len(fresh)


@coalescable
def write_evaluations(con: Any, rows: Sequence[Row]) -> None:
    """Upsert external evaluations (``EVALUATION_FIELDS`` order)."""
    upsert(
        con,
        "evaluations",
        EVALUATION_FIELDS,
        "id",
        rows,
        expressions={"evaluated_at": "to_timestamp({})"},
        stamps={"received_at": "now()"},
    )
