"""The PostgreSQL result store's reads part: the product's own reads (:mod:`tracescorer.store.reads`)
in a READ ONLY transaction on the pool, or, for a read command when no daemon runs, on a connection
of its own. Not the query path of users' SQL (no query role, no row limit but the read's own
``limit``); the SQL is the one DuckDB runs, ``?`` placeholders turned into psycopg's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracescorer.store.api import QueryResult, StoreError
from tracescorer.store.postgres.bulk import qmark_to_pyformat
from tracescorer.store.postgres.query import quote_ident, result
from tracescorer.store.postgres.tx import Tx
from tracescorer.store.statement import Query


class ReadsPart(Tx):
    """:class:`~tracescorer.store.reads.RowSource` on the pool."""

    async def fetch_rows(self, query: Query) -> QueryResult:
        return await self._tx(fetch_rows, query.sql, list(query.params), query.limit, write=False)


class DirectRows:
    """:class:`~tracescorer.store.reads.RowSource` straight on PostgreSQL, for a read command when no
    daemon runs: a connection per read."""

    def __init__(self, dsn: str, *, schema: str, connect_timeout_s: float) -> None:
        self._dsn = dsn
        self._schema = schema
        self._connect_timeout_s = connect_timeout_s

    async def fetch_rows(self, query: Query) -> QueryResult:
        import psycopg
        from psycopg.types.string import TextLoader

        from tracescorer.config import mask_dsn

        try:
            async with await psycopg.AsyncConnection.connect(
                self._dsn, connect_timeout=int(self._connect_timeout_s)
            ) as conn:
                for json_type in ("json", "jsonb"):  # as text, as the pool's connections give them
                    conn.adapters.register_loader(json_type, TextLoader)
                await conn.execute("SELECT set_config('search_path', %s, false)", [quote_ident(self._schema)])
                async with conn.transaction():
                    return await fetch_rows(conn, query.sql, list(query.params), query.limit)
        except psycopg.OperationalError as exc:
            raise StoreError(f"cannot read PostgreSQL {mask_dsn(self._dsn)}: {str(exc).strip()}") from None
        except psycopg.Error as exc:
            raise StoreError(f"read failed: {str(exc).strip()}") from None


async def fetch_rows(conn: Any, sql: str, params: Sequence[Any], limit: int | None) -> QueryResult:
    """Run one of the store's own SELECTs in the transaction open on ``conn``, read only: every row,
    or ``limit`` of them (``truncated`` past it)."""
    await conn.execute("SET TRANSACTION READ ONLY")
    sql = sql if limit is None else f"{sql} LIMIT {int(limit) + 1}"
    cur = await conn.execute(qmark_to_pyformat(sql) if params else sql, list(params) if params else None)
    fetched = await cur.fetchall()
    return result(cur.description or [], conn.adapters.types, fetched, len(fetched) if limit is None else limit)
