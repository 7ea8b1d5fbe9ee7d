"""``judge_batches`` rows to and from :class:`~tracescorer.records.judge_batches.JudgeBatchRecord` (both engines)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tracescorer.records.judge_batches import JudgeBatchRecord
from tracescorer.store.tables import JUDGE_BATCH_COLUMNS, column_names

BATCH_LIST = ", ".join(column_names(JUDGE_BATCH_COLUMNS))


def batch_values(batch: JudgeBatchRecord) -> tuple[Any, ...]:
    """A ``judge_batches`` row (:data:`~tracescorer.store.tables.JUDGE_BATCH_COLUMNS` order)."""
    keys = json.dumps(list(batch.request_keys))
    return (batch.id, batch.model, batch.status, keys, batch.created_at, batch.provider_batch_id)


def batch_from_row(row: Sequence[Any]) -> JudgeBatchRecord:
    keys = row[3] if isinstance(row[3], list) else json.loads(row[3])
    return JudgeBatchRecord(
        id=row[0],
        model=row[1],
        status=row[2],
        request_keys=tuple(keys),
        created_at=float(row[4]),
        provider_batch_id=row[5],
    )
