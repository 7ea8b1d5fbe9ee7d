"""The embedded store: one DuckDB file served by a store process beside the daemon.

The daemon's side is :class:`DuckDBStore` (:mod:`.store`); the store process is :mod:`.engine`;
the rest are the SQL operations it runs (:mod:`.ops`, :mod:`.deliveries`, :mod:`.monitors`,
:mod:`.keys`), the file layout (:mod:`.layout`), the schema versions (:mod:`.migrations`) and the
read-only query guard (:mod:`.readonly`).
"""

from tracescorer.store.duckdb.store import CommitObserver, DuckDBStore, open_read_only, run_read_query

__all__ = ["CommitObserver", "DuckDBStore", "open_read_only", "run_read_query"]
