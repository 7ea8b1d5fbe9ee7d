"""The files of a DuckDB store: the database (``store.path``) and, beside it, two span logs.

The span log's tables (``spans``, ``log_records``) live in two database files of their own,
attached to the main one as :data:`SPAN_LOGS`; the main database has views of the same names
over both, so queries read ``spans`` as one table.

Why: a DuckDB checkpoint holds every commit of its database for its whole length, and every
acknowledgement waits for a commit. In one file, the checkpoints of the results tables (upserted
rows, primary-key indexes that grow with the tables) took 0.25-0.75 s under load (ack p99 0.9 s
at 3k spans/s); in a span log file of its own, one checkpoint in two still took 0.7-1.1 s at 5k
spans/s. With two span logs the telemetry writer appends to one while the other checkpoints
(:class:`~tracescorer.store.duckdb.engine.Engine`), so no commit of telemetry waits for a checkpoint.

A transaction writes to one file only (DuckDB's rule); the store's operations keep to that.

The files belong together: the main database has an id (``schema_info``), and each span log
carries the id of the database it belongs to (:func:`check_belonging`, :func:`claim_span_logs`);
so does the daemon's segment log folder (``<store.path>.log/`` or ``segment_log.path``), in a file
:data:`LOG_STAMP` of its own. A new database beside span logs or a segment log holding records
left by another one, or span logs or a segment log stamped for another database, are refused at
start with a message naming the files: adopting them would replay their traffic and score their
traces again. A segment log without records (or without a stamp: from before the stamp) is
adopted.

Every database is opened with row groups of :data:`ROW_GROUP_SIZE` rows. A checkpoint rewrites the
last, partly filled row group of each table it appends to; with DuckDB's default of 122,880 rows
that rewrite grew as the row group filled, so checkpoints of the same WAL size (256 MB) of the
results database took 0.6 to 9.5 s under continuous traffic (re-compressing the runs' messages),
holding the results commits meanwhile: assembly lag p99 went past idle_s + 2 s in one 40 s step
in two at 3.5k spans/s. With 8,192 rows they took 0.57-0.80 s and every step kept up. DuckDB does
not keep the size in the file, so the main database too is attached (to an in-memory one) rather
than opened: only ATTACH takes the option.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import duckdb

#: Catalog names of the attached span logs; telemetry is appended to either, reads see both.
SPAN_LOGS = ("ts_spans_a", "ts_spans_b")
MEMORY = ":memory:"
ROW_GROUP_SIZE = 8192
_RESERVED = frozenset({"memory", "system", "temp", "main", *SPAN_LOGS})


class LayoutError(RuntimeError):
    """The store's files do not fit together (e.g. a span log of a database is missing)."""


def span_log_paths(path: str | Path) -> list[str]:
    """``/data/tracescorer.duckdb`` -> ``/data/tracescorer.spans-a.duckdb`` and ``...spans-b...``
    (``:memory:`` stays)."""
    if str(path) == MEMORY:
        return [MEMORY for _ in SPAN_LOGS]
    p = Path(path)
    return [str(p.with_name(f"{p.stem}.spans-{catalog[-1]}{p.suffix}")) for catalog in SPAN_LOGS]


def files(path: str | Path) -> list[str]:
    """Every file of the store at ``path``: the databases and their write-ahead logs."""
    if str(path) == MEMORY:
        return []
    return [name for db in (str(path), *span_log_paths(path)) for name in (db, f"{db}.wal")]


def union_view(table: str) -> str:
    """The main database's view of one span-log table over both span logs."""
    branches = " UNION ALL ".join(f"SELECT * FROM {catalog}.{table}" for catalog in SPAN_LOGS)
    return f"CREATE OR REPLACE VIEW {table} AS {branches}"


def quote(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _literal(path: str | Path) -> str:
    """``path`` as a SQL string literal."""
    return "'" + str(path).replace("'", "''") + "'"


def catalog_of(path: str | Path) -> str:
    """The catalog name of the database at ``path``: its file's stem, as DuckDB names it when it
    opens the file itself (``/data/ts.duckdb`` -> ``ts``); a stem DuckDB keeps for itself gets ``_db``."""
    stem = Path(path).stem
    return f"{stem}_db" if stem.lower() in _RESERVED else stem


def connect(path: str | Path, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    """Open the main database at ``path`` read-write with :data:`ROW_GROUP_SIZE`, as the default
    catalog of the returned connection. Cursors of it start in the in-memory catalog:
    :func:`use` each one."""
    con = duckdb.connect(MEMORY, config=config)
    if str(path) == MEMORY:
        return con
    try:
        catalog = quote(catalog_of(path))
        con.execute(f"ATTACH {_literal(path)} AS {catalog} (ROW_GROUP_SIZE {ROW_GROUP_SIZE})")
        con.execute(f"USE {catalog}")
    except BaseException:
        con.close()
        raise
    return con


def use(cursor: duckdb.DuckDBPyConnection, catalog: str) -> duckdb.DuckDBPyConnection:
    """Make ``catalog`` the default of ``cursor`` (a fresh cursor starts in the in-memory one); returns it."""
    cursor.execute(f"USE {quote(catalog)}")
    return cursor


def main_catalog(con: Any) -> str:
    rows = con.execute("SELECT current_database()").fetchall()
    return str(rows[0][0])


def holds_span_log(con: Any) -> bool:
    """Whether the main database still holds the span log itself (a database from before the split)."""
    return _has(con, "duckdb_tables()", "table_name")


def _split(con: Any) -> bool:
    """Whether the main database reads its span log from the attached files (``spans`` is a view)."""
    return _has(con, "duckdb_views()", "view_name")


def _has(con: Any, listing: str, column: str) -> bool:
    rows = con.execute(
        f"SELECT count(*) FROM {listing} WHERE database_name = current_database() "
        f"AND schema_name = 'main' AND {column} = 'spans'"
    ).fetchall()
    return bool(rows and rows[0][0])


def attach(con: Any, path: str | Path, *, read_only: bool = False) -> bool:
    """Attach the span logs of the database ``con`` has open at ``path``.

    Returns False (nothing attached) when the database predates the split and has no span log
    files yet: read-only, it is queried as it is; read-write,
    :func:`tracescorer.store.duckdb.migrations.migrate` moves its span log. Raises :class:`LayoutError`
    when the database reads span logs of which a file is missing: an empty one would silently
    stand in for the spans it held.
    """
    paths = span_log_paths(path)
    missing = [p for p in paths if p != MEMORY and not os.path.exists(p)]
    if missing:
        if _split(con):
            raise LayoutError(
                f"the span log {missing[0]} of database {path} is missing; restore it beside the "
                "database (the files belong together) or use another store.path"
            )
        if read_only:
            return False
    for catalog, log_path in zip(SPAN_LOGS, paths, strict=False):
        options = "READ_ONLY" if read_only else f"ROW_GROUP_SIZE {ROW_GROUP_SIZE}"
        con.execute(f"ATTACH IF NOT EXISTS {_literal(log_path)} AS {catalog} ({options})")
    return True


def wal_of(con: Any, catalog: str) -> str | None:
    """The write-ahead log file of an attached database (None in memory)."""
    rows = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = ?", [catalog]).fetchall()
    return f"{rows[0][0]}.wal" if rows and rows[0][0] else None


#: the key of the main database's id in ``schema_info``, and the span logs' table that carries it
DATABASE_ID_KEY = "database_id"
_IDENTITY_TABLE = "span_log_identity"


#: the file in the segment log's folder naming the database it belongs to
LOG_STAMP = "database_id"


def check_fresh(path: str | Path, segment_log: str | None = None) -> None:
    """Refuse to create a new database at ``path`` beside span-log files that already exist, or
    beside a segment log folder that holds records: they were left by another database (a new one
    would adopt them, replay the records and score their traces again)."""
    if str(path) == MEMORY or os.path.exists(path):
        return
    left = [f"the span log {p}" for p in span_log_paths(path) if os.path.exists(p)]
    if segment_log is not None and _log_bytes(segment_log):
        left.append(f"the segment log folder {segment_log}")
    if left:
        it, its, belongs = ("it", "its", "it belongs") if len(left) == 1 else ("them", "their", "they belong")
        raise LayoutError(
            f"{', '.join(left[:-1])}{' and ' if len(left) > 1 else ''}{left[-1]} {'was' if len(left) == 1 else 'were'} "
            f"left by another database: {path} does not exist, and a new database there would adopt {it} and "
            f"score {its} traces again. To start over, delete {it} too (or move {it} away); else restore the "
            f"database {belongs} to"
        )


def _database_id(con: Any) -> str | None:
    rows = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND table_name = 'schema_info'"
    ).fetchall()
    if not rows or not rows[0][0]:
        return None
    found = con.execute("SELECT value FROM schema_info WHERE key = ?", [DATABASE_ID_KEY]).fetchall()
    return str(found[0][0]) if found else None


def _stamp(con: Any, catalog: str) -> str | None:
    rows = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = ? AND table_name = ?", [catalog, _IDENTITY_TABLE]
    ).fetchall()
    if not rows or not rows[0][0]:
        return None
    found = con.execute(f"SELECT database_id FROM {quote(catalog)}.{_IDENTITY_TABLE} LIMIT 1").fetchall()
    return str(found[0][0]) if found else None


def check_belonging(con: Any, path: str | Path, segment_log: str | None = None) -> None:
    """Raise :class:`LayoutError` when an attached span log, or the segment log folder holding
    records, carries the id of another database than the one ``con`` has open at ``path`` (or the
    database has no id: it is older than the span log). Reads only: run it before anything writes."""
    database_id = _database_id(con)
    stamp = _log_stamp(segment_log) if segment_log is not None else None
    if segment_log is not None and stamp is not None and stamp != database_id and _log_bytes(segment_log):
        raise LayoutError(
            f"the segment log folder {segment_log} belongs to another database (id {stamp}), not to {path} "
            f"(id {database_id or 'none'}): replayed into it, its records would be scored again. Move the "
            "folder away (a new one is started) or restore the database it belongs to"
        )
    for catalog, log_path in zip(SPAN_LOGS, span_log_paths(path), strict=False):
        stamp = _stamp(con, catalog)
        if stamp is not None and stamp != database_id:
            raise LayoutError(
                f"the span log {log_path} belongs to another database (id {stamp}), not to {path} "
                f"(id {database_id or 'none'}): the files of a store belong together. Move the span logs "
                "away (a new one is started) or restore the database they belong to"
            )


def claim_span_logs(con: Any, segment_log: str | None = None) -> str:
    """Give the main database an id if it has none, and stamp it into every span log that has
    none yet (one transaction per file) and into the segment log folder (created if missing);
    returns the id. After :func:`check_belonging` and the migrations."""
    database_id = _database_id(con)
    if database_id is None:
        database_id = secrets.token_hex(16)
        con.execute("INSERT OR REPLACE INTO schema_info VALUES (?, ?)", [DATABASE_ID_KEY, database_id])
    for catalog in SPAN_LOGS:
        if _stamp(con, catalog) is not None:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(f"CREATE TABLE IF NOT EXISTS {quote(catalog)}.{_IDENTITY_TABLE} (database_id VARCHAR NOT NULL)")
            con.execute(f"INSERT INTO {quote(catalog)}.{_IDENTITY_TABLE} VALUES (?)", [database_id])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    if segment_log is not None and _log_stamp(segment_log) != database_id:
        _write_stamp(segment_log, database_id)
    return database_id


def _log_bytes(folder: str) -> int:
    """Bytes in the segment log folder's files beside its stamp (0: no folder, no records)."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return 0
    return sum(e.stat().st_size for e in entries if e.is_file() and not e.name.startswith(LOG_STAMP))


def _log_stamp(folder: str) -> str | None:
    try:
        with open(os.path.join(folder, LOG_STAMP), encoding="ascii") as f:
            return f.read().strip() or None
    except FileNotFoundError:
        return None


def _write_stamp(folder: str, database_id: str) -> None:
    """Write :data:`LOG_STAMP` whole (a new file renamed over the old one, synced)."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, LOG_STAMP)
    fd = os.open(f"{path}.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, f"{database_id}\n".encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(f"{path}.tmp", path)
    dir_fd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
