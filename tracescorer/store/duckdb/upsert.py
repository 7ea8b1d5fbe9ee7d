"""Bulk upserts into DuckDB: replace many rows by key from one Arrow table.

Insert-then-merge rather than ``ON CONFLICT``: the rows of the keys already present are deleted
(their ``created_at`` carried over) and the whole batch is appended, all in the caller's
transaction. Measured on 1,000-row batches of score rows this is about half the cost of ``INSERT
... ON CONFLICT DO UPDATE`` (~6 vs ~13 µs a row) and close to a plain append; ``executemany``
with ``ON CONFLICT`` runs row by row at several ms a row. The fixed cost of a statement is ~2 ms,
so callers pass as many rows at a time as they can (the store process coalesces jobs). Rows are
de-duplicated by key first, the last one winning.

Existing keys are found through the key's ART index: ``key IN (?, ?, ...)`` in lists of at most
``index_scan_max_count`` parameters. ``key IN (SELECT key FROM batch)`` is a hash join that reads
the whole key column, a cost that grows with the table (measured on the scores table: 6 µs a row
at 60k rows, 190 µs at 2M; with the index 30 µs at either size), so a daemon under continuous
traffic fell further behind every hour.

A row stored as it is already (the same rows written again) can be left as stored, stamps included
(``upsert(same=...)``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

_BATCH = "upsert_batch"
_KEPT = "upsert_kept"


def upsert(
    con: Any,
    table: str,
    columns: Sequence[str],
    key: str,
    rows: Sequence[Sequence[Any]],
    *,
    expressions: Mapping[str, str] | None = None,
    stamps: Mapping[str, str] | None = None,
    keep: Sequence[str] = (),
    new: Sequence[bool] | None = None,
    json: Collection[str] = (),
    same: set[Any] | None = None,
) -> int:
    """Insert or replace ``rows`` (values in ``columns`` order) keyed by ``key``; returns rows written.

    ``expressions`` turns a batch column into its stored value, ``{}`` standing for the column
    (``{"started_at": "make_timestamp({})::TIMESTAMPTZ"}``); ``stamps`` adds columns set by SQL
    (``{"updated_at": "now()"}``); ``keep`` names stamp columns (TIMESTAMPTZ) whose stored value
    survives a replacement (``created_at``). ``new`` says per row that its key is not stored yet:
    that key is not looked up (~9 µs a key through the index, most of an upsert's cost); if it is
    stored after all, the insert fails on the primary key (:func:`tracescorer.store.duckdb.ops.hinted`).
    ``json`` names JSON columns whose values are text of the callers' JSON encoder (valid by
    construction): they go in as Arrow's JSON type, which DuckDB stores without parsing each value
    again (a VARCHAR to JSON cast validates: ~5 µs a run of message columns). With ``same``, a row
    whose stored row holds the same value in every column is left as stored, stamps included (the
    same rows written again), and its key added to ``same``; the keys looked up are then read with
    their whole rows (about three times a lookup of the stamps alone).
    """
    if not rows:
        return 0
    import pyarrow as pa  # the store process only; the daemon never loads Arrow

    key_index = list(columns).index(key)
    latest = {row[key_index]: (row, bool(new[i]) if new is not None else False) for i, row in enumerate(rows)}
    unique = [row for row, _ in latest.values()]
    keys = [k for k, (_, is_new) in latest.items() if not is_new]  # those that may be stored
    batch, select = _batch(columns, key, unique, expressions, json)
    con.register(_BATCH, batch)
    kept: list[tuple[Any, ...]] = []
    try:
        if same is not None and keys:  # a row the same as stored is not deleted nor inserted
            values = [(c, v) for c, v in zip(columns, select, strict=True) if c != key]
            found = _stored(con, table, key, keys, keep, values)
            alike = {r[0] for r in found if r[-1]}
            same |= alike
            kept, keys = [r[:-1] for r in found if not r[-1]], [r[0] for r in found if not r[-1]]
            if alike:
                unique = [row for row in unique if row[key_index] not in alike]
                unregister(con, _BATCH)
                if unique:
                    batch, select = _batch(columns, key, unique, expressions, json)
                    con.register(_BATCH, batch)
        elif keep and keys:  # usually none: most keys are new
            kept = _stored(con, table, key, keys, keep)
            keys = [r[0] for r in kept]
        for part in chunks(keys):
            con.execute(f"DELETE FROM {table} WHERE {key_in(key, len(part))}", part)
        if not unique:
            return 0
        extra = dict(stamps or {})
        kept = kept if keep else []
        select += [
            f"coalesce(to_timestamp(0) + to_microseconds(k.{c}), {v})" if c in keep and kept else v
            for c, v in extra.items()
        ]
        source = f"{_BATCH} b" + (f" LEFT JOIN {_KEPT} k ON k.{key} = b.{key}" if kept else "")
        if kept:
            con.register(
                _KEPT, pa.Table.from_arrays([column(list(col)) for col in zip(*kept, strict=False)], names=[key, *keep])
            )
        con.execute(f"INSERT INTO {table} ({', '.join([*columns, *extra])}) SELECT {', '.join(select)} FROM {source}")
    finally:
        unregister(con, _BATCH)
        if kept:
            unregister(con, _KEPT)
    return len(unique)


def _stored(
    con: Any,
    table: str,
    key: str,
    keys: list[Any],
    keep: Sequence[str],
    values: Sequence[tuple[str, str]] = (),
) -> list[tuple[Any, ...]]:
    """The stored rows among ``keys``: each key with its ``keep`` stamps (epoch µs) and, given
    ``values`` (columns and the SQL of their values in the registered batch, :func:`_batch`),
    whether the stored row holds those values. The rows are read through the index first (a
    MATERIALIZED CTE, compared in the SELECT list: a join with the batch compared in its WHERE
    clause scans the table)."""
    found: list[tuple[Any, ...]] = []
    stamps = "".join(f", epoch_us(t.{c})" for c in keep)
    alike = " AND ".join(f"t.{c} IS NOT DISTINCT FROM {v}" for c, v in values)
    for part in chunks(keys):
        where = key_in(key, len(part))
        sql = (
            f"WITH t AS MATERIALIZED (SELECT * FROM {table} WHERE {where}) "
            f"SELECT t.{key}{stamps}, {alike} FROM t JOIN {_BATCH} b ON b.{key} = t.{key}"
            if values
            else f"SELECT t.{key}{stamps} FROM {table} t WHERE {where}"
        )
        found += con.execute(sql, part).fetchall()
    return found


def _batch(
    columns: Sequence[str],
    key: str,
    rows: Sequence[Sequence[Any]],
    expressions: Mapping[str, str] | None,
    json: Collection[str],
) -> tuple[Any, list[str]]:
    """``rows`` (unique keys) as an Arrow table to register as ``b``, and the SQL of each column's
    stored value from it (``NULL`` for a column all None: left out of the table)."""
    import pyarrow as pa

    exprs = expressions or {}
    text = pa.json_(pa.string()) if hasattr(pa, "json_") else None  # pyarrow 19+; before, a cast as ever
    names: list[str] = []
    arrays: list[Any] = []
    select: list[str] = []
    for name, values in zip(columns, zip(*rows, strict=False), strict=False):
        if name != key and name not in exprs and all(v is None for v in values):
            select.append("NULL")  # nothing to convert, register or scan (a code score's judge columns)
            continue
        names.append(name)
        arrays.append(column(list(values), text if name in json else None))
        select.append(exprs.get(name, "{}").format(f"b.{name}"))
    return pa.Table.from_arrays(arrays, names=names), select


def column(values: list[Any], kind: Any = None) -> Any:
    """An Arrow array of ``values``, of type ``kind`` or typed from the first value that is not None.

    Arrow's own type inference tries ``import dateutil.relativedelta`` on every call (not
    installed here, so never cached): ~70 µs a column, measured as most of a small upsert's Python
    cost. Values that do not fit the guessed type fall back to inference; integers past int64
    are unsigned (Arrow's inference refuses them).
    """
    import pyarrow as pa

    if kind is not None:
        return pa.array(values, type=kind)
    first = next((v for v in values if v is not None), None)
    kind = _KINDS.get(type(first))
    if kind == "int64" and any(type(v) is float for v in values):
        kind = "float64"  # a float among ints: int64 would truncate it silently
    if kind is not None:
        try:
            return pa.array(values, type=kind)
        except (pa.ArrowException, TypeError, OverflowError):
            if kind == "int64":  # past 2^63: nanosecond times go up to 2^64 - 1 (UBIGINT columns)
                return pa.array(values, type="uint64")
    return pa.array(values)


_KINDS = {str: "string", bool: "bool", int: "int64", float: "float64", bytes: "binary", type(None): "null"}


def unregister(con: Any, name: str) -> None:
    """Drop a registered Arrow table, also inside a failed transaction (which refuses it)."""
    try:
        con.unregister(name)
    except Exception:  # noqa: BLE001 - an aborted transaction refuses it; the error that aborted it is what matters
        pass  # (the name is taken again by the next register)


#: DuckDB's ``index_scan_max_count`` (2048): a longer IN list is answered by a table scan.
_IN_LIST = 2000


def chunks(keys: list[Any]) -> list[list[Any]]:
    """``keys`` in lists short enough for :func:`key_in` to use the index."""
    return [keys[i : i + _IN_LIST] for i in range(0, len(keys), _IN_LIST)]


def key_in(key: str, n: int) -> str:
    """``key IN (?, ...)`` with ``n`` parameters: answered through the key's index."""
    return f"{key} IN ({', '.join('?' * n)})"
