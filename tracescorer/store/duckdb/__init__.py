"""The embedded store: one DuckDB file served by a store process beside the daemon.

The daemon's side is :class:`DuckDBStore` (:mod:`.store`): the store process's client
(:mod:`.process`) with one part per consumer (:mod:`.spanlog`, :mod:`.runs`, :mod:`.scores`,
:mod:`.deliveries`, :mod:`.monitors`, :mod:`.keys`, :mod:`.coordination`), each beside the SQL it runs. The store process
is :mod:`.engine` (its writers' queues: :mod:`.batches`); :mod:`.layout` places the files, :mod:`.migrations` versions the schema,
:mod:`.readonly` guards read-only queries and :mod:`.readfile` serves them from a file no daemon holds.
"""

from tracescorer.store.duckdb.process import CommitObserver
from tracescorer.store.duckdb.readfile import open_read_only, run_read_query
from tracescorer.store.duckdb.store import DuckDBStore

__all__ = ["CommitObserver", "DuckDBStore", "open_read_only", "run_read_query"]
