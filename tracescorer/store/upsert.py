"""Bulk upserts into DuckDB: replace many rows by key from one Arrow table.

Insert-then-merge rather than ``ON CONFLICT``: the rows of the keys already present are deleted
(their ``created_at`` carried over) and the whole batch is appended, all in the caller's
transaction. Measured on 1,000-row batches of score rows this is about half the cost of ``INSERT
... ON CONFLICT DO UPDATE`` (~6 vs ~13 µs a row) and close to a plain append; ``executemany``
with ``ON CONFLICT`` runs row by row at several ms a row. The fixed cost of a statement is ~2 ms,
so callers pass as many rows at a time as they can (the store process coalesces jobs). Rows are
de-duplicated by key first, the last one winning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_BATCH = "upsert_batch"
_KEPT = "upsert_kept"


def upsert(con: Any, table: str, columns: Sequence[str], key: str, rows: Sequence[Sequence[Any]], *,
           expressions: Mapping[str, str] | None = None, stamps: Mapping[str, str] | None = None,
           keep: Sequence[str] = ()) -> int:
    """Insert or replace ``rows`` (values in ``columns`` order) keyed by ``key``; returns rows written.

    ``expressions`` turns a batch column into its stored value, ``{}`` standing for the column
    (``{"started_at": "make_timestamp({})::TIMESTAMPTZ"}``); ``stamps`` adds columns set by SQL
    (``{"updated_at": "now()"}``); ``keep`` names stamp columns whose stored value survives a
    replacement (``created_at``).
    """
    if not rows:
        return 0
    import pyarrow as pa  # the store process only; the daemon never loads Arrow

    key_index = list(columns).index(key)
    unique = list({row[key_index]: row for row in rows}.values())
    arrays = [pa.array(list(col)) for col in zip(*unique)]
    con.register(_BATCH, pa.Table.from_arrays(arrays, names=list(columns)))
    exprs = expressions or {}
    extra = dict(stamps or {})
    try:
        if keep:
            con.execute(f"CREATE OR REPLACE TEMP TABLE {_KEPT} AS SELECT {key}, {', '.join(keep)} FROM {table} "
                        f"WHERE {key} IN (SELECT {key} FROM {_BATCH})")
        con.execute(f"DELETE FROM {table} WHERE {key} IN (SELECT {key} FROM {_BATCH})")
        select = [exprs.get(c, "{}").format(f"b.{c}") for c in columns]
        select += [f"coalesce(k.{c}, {v})" if c in keep else v for c, v in extra.items()]
        source = f"{_BATCH} b" + (f" LEFT JOIN {_KEPT} k ON k.{key} = b.{key}" if keep else "")
        con.execute(f"INSERT INTO {table} ({', '.join([*columns, *extra])}) SELECT {', '.join(select)} FROM {source}")
        if keep:
            con.execute(f"DROP TABLE {_KEPT}")
    finally:
        con.unregister(_BATCH)
    return len(unique)
