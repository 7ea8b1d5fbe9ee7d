"""Opening the store's database in the store process: DuckDB settings, the file lock, migrations, the
query lockdown."""

from __future__ import annotations

import logging
import os
import stat
import time
from typing import Any

import duckdb

from tracescorer.sizes import size_bytes
from tracescorer.store.duckdb import layout, readonly
from tracescorer.store.duckdb.migrations import migrate
from tracescorer.store.duckdb.wire import EngineOptions

Connection = duckdb.DuckDBPyConnection
log = logging.getLogger("tracescorer.store.duckdb.engine")  # run in the store process


def settings_for(options: EngineOptions) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "memory_limit": options.memory_limit,
        # the query box's scans send Arrow batches whose types read back as they were (JSON, HUGEINT...)
        "arrow_lossless_conversion": True,
        # checkpoints run beside the writer (Engine._checkpointer): DuckDB's own, inside a commit,
        # stalls every write for the checkpoint's length; it stays only as a safety net
        "checkpoint_threshold": f"{4 * size_bytes(options.checkpoint_threshold)}B",
    }
    if options.path != ":memory:":
        # where DuckDB spills what does not fit memory_limit: beside the file, as DuckDB does for a
        # database it opens itself (the main database is attached to an in-memory one, whose default
        # is ".tmp" in the working directory)
        cfg["temp_directory"] = f"{options.path}.tmp"
    if options.duckdb_threads:
        cfg["threads"] = options.duckdb_threads
    if options.compression != "auto":
        cfg["force_compression"] = options.compression
    cfg.update(options.settings)
    return cfg


def open_database(options: EngineOptions) -> Connection:
    """Open the store's database read-write with its span logs (created 0600 under the store
    process's umask), check that the files belong together, migrate, lock the query config down."""
    if options.path != ":memory:":
        parent = os.path.dirname(os.path.abspath(options.path))
        if not os.path.isdir(parent):
            raise FileNotFoundError(f"directory {parent} does not exist")
        layout.check_fresh(options.path, options.segment_log)
        _warn_if_readable(options.path)
    # A daemon killed a moment ago may still be releasing the file: retry the lock briefly.
    deadline = time.monotonic() + 10.0
    while True:
        try:
            con = layout.connect(options.path, settings_for(options))
            try:
                layout.attach(con, options.path)
                layout.check_belonging(con, options.path, options.segment_log)  # before anything writes
            except BaseException:
                con.close()
                raise
            break
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    migrate(con)
    layout.claim_span_logs(con, options.segment_log)
    # the lockdown of query connections holds for the whole database the daemon serves (set
    # once the span log is attached: ATTACH is file access)
    readonly.lock_down(con)
    return con


def _warn_if_readable(path: str) -> None:
    """New files are created 0600 (the store process's umask); files from before are left as they
    are, with a word when other users can read them."""
    readable = []
    for name in layout.files(path):
        try:
            mode = os.stat(name).st_mode
        except OSError:
            continue
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            readable.append(f"{name} ({stat.filemode(mode)})")
    if readable:
        log.warning("database files readable by other users: %s; chmod 600 them", ", ".join(readable))
