"""Bulk upserts into PostgreSQL: one ``INSERT … SELECT … FROM unnest(…) ON CONFLICT DO UPDATE``.

Each column travels as one array parameter, so a batch of any size is one statement and one
round trip (measured ~3k rows/s per writer with fsync on, the update-heavy mix of score rows;
``executemany`` is several times slower). Rows are de-duplicated by key (the last one wins: ON
CONFLICT cannot touch a row twice in one statement) and sorted by key, so two daemons writing
overlapping keys lock rows in the same order and never deadlock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracescorer.store.tables import Columns

_ARRAY = {
    "VARCHAR": "text[]",
    "JSON": "text[]",
    "DOUBLE": "float8[]",
    "BIGINT": "int8[]",
    "UBIGINT": "int8[]",
    "INTEGER": "int4[]",
    "BOOLEAN": "bool[]",
    "TIMESTAMPTZ": "int8[]",
}
_INT64_MAX = 2**63 - 1


def clean(value: Any) -> Any:
    """A value PostgreSQL can hold: text without NUL characters, integers within int8."""
    if type(value) is str:
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if type(value) is int and value > _INT64_MAX:
        return _INT64_MAX
    return value


def column_types(columns: Columns) -> dict[str, str]:
    """Column name -> its DuckDB-style base type (``VARCHAR``, ``JSON``, ...)."""
    return {name: kind.split(" ")[0] for name, kind in columns}


def upsert_sql(
    table: str,
    columns: Sequence[str],
    types: Mapping[str, str],
    key: str,
    *,
    expressions: Mapping[str, str] | None = None,
    stamps: Mapping[str, str] | None = None,
    keep: Sequence[str] = (),
    merge: Mapping[str, str] | None = None,
    where: str = "",
    returning: str = "",
) -> str:
    """The statement for :func:`upsert_params` values.

    ``expressions`` maps a column to the SQL that turns its array element ``{}`` into the stored
    value (JSON text and microsecond times get one by default); ``stamps`` adds columns set by SQL
    (``now()``); ``keep`` names stamp columns an update leaves as they were (``created_at``);
    ``merge`` maps a column to the SQL an update sets it to (``t`` the stored row, ``excluded``
    the new one), and ``where`` is the condition for an update at all (else the row stays).
    """
    exprs = dict(expressions or {})
    for c in columns:
        if c not in exprs and types[c] == "JSON":
            exprs[c] = "{}::json"
        elif c not in exprs and types[c] == "TIMESTAMPTZ":
            exprs[c] = "to_timestamp({}::float8 / 1e6)"
    extra = dict(stamps or {})
    arrays = ", ".join(f"%s::{_ARRAY[types[c]]}" for c in columns)
    select = [exprs.get(c, "{}").format(f"b.{c}") for c in columns] + list(extra.values())
    merged = dict(merge or {})
    updates = [f"{c} = {merged.get(c, f'excluded.{c}')}" for c in columns if c != key]
    updates += [f"{c} = excluded.{c}" for c in extra if c not in keep]
    return (
        f"INSERT INTO {table} AS t ({', '.join([*columns, *extra])}) "
        f"SELECT {', '.join(select)} FROM unnest({arrays}) AS b({', '.join(columns)}) "
        f"ON CONFLICT ({key}) DO UPDATE SET {', '.join(updates)}{f' WHERE {where}' if where else ''}{returning}"
    )


def upsert_params(columns: Sequence[str], key: str, rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """One list per column of the de-duplicated rows, sorted by key."""
    index = list(columns).index(key)
    unique = sorted({row[index]: row for row in rows}.values(), key=lambda r: r[index])
    return [[clean(row[i]) for row in unique] for i in range(len(columns))]


def qmark_to_pyformat(sql: str) -> str:
    """``?`` placeholders (the query API's, as in DuckDB) as psycopg's ``%s``, and literal ``%`` doubled;
    string literals, quoted identifiers and comments are left as they are."""
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in ("'", '"'):
            end = i + 1
            while end < n:
                if sql[end] == ch:
                    if end + 1 < n and sql[end + 1] == ch:
                        end += 2
                        continue
                    break
                end += 1
            out.append(sql[i : end + 1].replace("%", "%%"))
            i = end + 1
            continue
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            out.append(sql[i:end].replace("%", "%%"))
            i = end
            continue
        if sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(sql[i:end].replace("%", "%%"))
            i = end
            continue
        out.append("%s" if ch == "?" else "%%" if ch == "%" else ch)
        i += 1
    return "".join(out)
