"""Bulk upserts into DuckDB: insert many rows from one Arrow table, update those whose key exists.

One ``INSERT ... SELECT ... FROM batch ON CONFLICT (key) DO UPDATE`` per call: DuckDB scans the
Arrow table without a Python object per value (``executemany`` with ``ON CONFLICT`` runs row by
row at several ms a row; multi-row ``VALUES`` lists spend most of their time binding parameters).
Rows are de-duplicated by key first, the last one winning (DuckDB refuses two updates of one key
in one statement).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_BATCH = "upsert_batch"


def upsert(con: Any, table: str, columns: Sequence[str], key: str, rows: Sequence[Sequence[Any]], *,
           expressions: Mapping[str, str] | None = None, insert_extra: Mapping[str, str] | None = None,
           update_extra: Mapping[str, str] | None = None) -> int:
    """Insert or update ``rows`` (values in ``columns`` order) keyed by ``key``; returns rows written.

    ``expressions`` turns a batch column into its stored value (``{"started_at":
    "make_timestamp(started_at)::TIMESTAMPTZ"}``); ``insert_extra`` adds columns set by SQL on insert
    (``{"created_at": "now()"}``); ``update_extra`` adds assignments on update
    (``{"updated_at": "now()"}``).
    """
    if not rows:
        return 0
    import pyarrow as pa  # the store process only; the daemon never loads Arrow

    key_index = list(columns).index(key)
    unique = list({row[key_index]: row for row in rows}.values())
    arrays = [pa.array(list(col)) for col in zip(*unique)]
    con.register(_BATCH, pa.Table.from_arrays(arrays, names=list(columns)))
    exprs = expressions or {}
    extra = dict(insert_extra or {})
    select = ", ".join([*(exprs.get(c, c) for c in columns), *extra.values()])
    sets = [f"{c} = excluded.{c}" for c in columns if c != key]
    sets += [f"{c} = {v}" for c, v in (update_extra or {}).items()]
    try:
        con.execute(
            f"INSERT INTO {table} ({', '.join([*columns, *extra])}) SELECT {select} FROM {_BATCH} "
            f"ON CONFLICT ({key}) DO UPDATE SET {', '.join(sets)}"
        )
    finally:
        con.unregister(_BATCH)
    return len(unique)
