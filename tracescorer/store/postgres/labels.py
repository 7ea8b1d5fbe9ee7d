"""Human labels and other tools' evaluations in PostgreSQL (semantics: :mod:`tracescorer.store.duckdb.labels`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracescorer.records.labels import EvaluationRecord, LabelRecord
from tracescorer.store.labels import (
    EVALUATION_FIELDS,
    LABEL_FIELDS,
    evaluation_values,
    label_values,
    newest_first_wins,
)
from tracescorer.store.postgres.bulk import column_types, upsert_params, upsert_sql
from tracescorer.store.postgres.tx import Tx
from tracescorer.store.tables import EVALUATION_COLUMNS, LABEL_COLUMNS

Conn = Any
Row = tuple[Any, ...]

_SECONDS = "to_timestamp({}::float8)"  # epoch seconds in, as the DuckDB part takes them
# a label replaces the stored one only when it is at least as recent
_LABELS_SQL = upsert_sql(
    "labels",
    LABEL_FIELDS,
    {**column_types(LABEL_COLUMNS), "labelled_at": "DOUBLE"},
    "id",
    expressions={"labelled_at": _SECONDS},
    stamps={"created_at": "now()", "updated_at": "now()"},
    keep=("created_at",),
    returning=" WHERE excluded.labelled_at >= t.labelled_at RETURNING id",
)
_EVALUATIONS_SQL = upsert_sql(
    "evaluations",
    EVALUATION_FIELDS,
    {**column_types(EVALUATION_COLUMNS), "evaluated_at": "DOUBLE"},
    "id",
    expressions={"evaluated_at": _SECONDS},
    stamps={"received_at": "now()"},
)


async def write_labels(conn: Conn, rows: Sequence[Row]) -> int:
    cur = await conn.execute(_LABELS_SQL, upsert_params(LABEL_FIELDS, "id", rows))
    return len(await cur.fetchall())


async def write_evaluations(conn: Conn, rows: Sequence[Row]) -> None:
    await conn.execute(_EVALUATIONS_SQL, upsert_params(EVALUATION_FIELDS, "id", rows))


class LabelsPart(Tx):
    """:class:`~tracescorer.store.api.LabelStore` and :class:`~tracescorer.store.api.EvaluationStore` in PostgreSQL."""

    async def write_labels(self, labels: Sequence[LabelRecord]) -> int:
        if not labels:
            return 0
        return await self._tx(write_labels, [label_values(r) for r in newest_first_wins(labels)])

    async def write_evaluations(self, evaluations: Sequence[EvaluationRecord]) -> None:
        if evaluations:
            await self._tx(write_evaluations, [evaluation_values(e) for e in evaluations])
            self.stats["rows"] += len(evaluations)
