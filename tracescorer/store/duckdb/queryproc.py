"""A query process: one read-only query at a time, in a process whose memory is its own.

``python -m tracescorer.store.duckdb.queryproc --fd N --memory-limit 512MB [--file PATH]``

Started by the store process's query box (:mod:`tracescorer.store.duckdb.querybox`) or, for a read
command with no daemon running, by :mod:`tracescorer.store.duckdb.readfile`. It runs DuckDB with
``memory_limit`` set to the query memory limit, no spilling to disk, one thread, the query lockdown
(:data:`tracescorer.store.duckdb.readonly.QUERY_CONFIG`), and once started it caps its own address
space (``RLIMIT_AS``) at what it holds plus that limit: DuckDB's ``memory_limit`` covers its buffer
manager only, and a statement such as ``SELECT len(range(1500000000))`` or ``repeat('x', 3e9)``
allocates past it; under the cap the allocation fails and the query ends with DuckDB's "Out of
Memory Error", in this process alone. The process runs at a lower CPU priority (nice 10), and ends
with its parent.

In the box, the database is the store process's (DuckDB lets one process hold a file): each table
of the store is a view over a :class:`RemoteTable`, an Arrow dataset whose scans ask the store for
the columns DuckDB projects and the rows the query's filters keep
(:mod:`tracescorer.store.duckdb.pushdown`), one batch at a time. With ``--file``, no daemon holds
the file and the process opens it read-only itself.

Requests and answers travel over the socket ``--fd`` (:mod:`tracescorer.ipc` frames):
``("query", sql, params, max_rows, timeout_s)`` is answered ``("result", QueryResult)`` or
``("failed", kind, message)``; scans ask ``("scan", id, table, columns, where, params)`` and
``("next", id)``, answered ``("batch", id, batch or None)`` or ``("scan_failed", id, message)``.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import os
import pickle
import resource
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from typing import Any

from tracescorer.ipc import BlockingChannel
from tracescorer.sizes import size_bytes

#: room above the query memory limit for what is not DuckDB's: Python, pyarrow, the result's rows
_HEADROOM_BYTES = 256 << 20
_PR_SET_PDEATHSIG = 1


def spawn(memory_limit: str, max_result_bytes: int, file: str | None = None) -> tuple[Any, BlockingChannel]:
    """Start a query process (the parent's side); its Popen and the channel to it."""
    import subprocess

    parent, child = socket.socketpair()
    try:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "tracescorer.store.duckdb.queryproc", "--fd", str(child.fileno())),
                *("--memory-limit", memory_limit, "--max-result-bytes", str(max_result_bytes)),
                *(("--file", file) if file else ()),
            ],
            pass_fds=(child.fileno(),),
            stdin=subprocess.DEVNULL,
        )
    except BaseException:
        parent.close()
        raise
    finally:
        child.close()
    return process, BlockingChannel(parent)


def exit_status(code: int | None) -> str:
    """How a query process ended, for a message."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _die_with_parent() -> None:
    """Ask Linux for SIGKILL when the parent (the store process, or the CLI) ends."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the end of the socket stops the process instead
        pass


def _address_space() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def cap_address_space(limit_bytes: int) -> int:
    """Cap this process's address space at what it has mapped now plus ``limit_bytes``; the cap."""
    cap = _address_space() + limit_bytes + _HEADROOM_BYTES
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    return cap


class Session:
    """This process's side of the socket: the current query's pushdowns, and the scans it asks for."""

    def __init__(self, chan: BlockingChannel) -> None:
        self._chan = chan
        self._lock = threading.Lock()  # a request and its answer are one exchange
        self._ids = itertools.count(1)
        self.pushdowns: dict[str, Any] = {}

    def exchange(self, message: tuple[Any, ...]) -> Any:
        with self._lock:
            self._chan.send(message)
            answer = self._chan.recv()
        if answer is None:
            raise ConnectionError("the store process went away")
        return answer

    def scan(self, table: str, columns: list[str]) -> Iterator[Any]:
        """The batches of ``columns`` of ``table`` the current query needs, as the store sends them."""
        from tracescorer.store.duckdb.pushdown import EVERY_ROW

        pushed = self.pushdowns.get(table.lower(), EVERY_ROW)
        scan_id = next(self._ids)
        message: tuple[Any, ...] = ("scan", scan_id, table, columns, pushed.where, pushed.params)
        while True:
            answer = self.exchange(message)
            if answer[0] == "scan_failed":
                raise RuntimeError(answer[2])
            if answer[2] is None:
                return
            yield answer[2]
            message = ("next", scan_id)


def _remote_table_class() -> type:
    import pyarrow as pa
    import pyarrow.dataset as pds

    class RemoteTable(pds.Dataset):  # type: ignore[misc]
        """A table of the store process as an Arrow dataset DuckDB scans with projection and filter
        pushdown (DuckDB calls ``scanner(columns=, filter=)``); the rows come from :meth:`Session.scan`."""

        def __init__(self, name: str, schema: pa.Schema, session: Session) -> None:
            self._name = name
            self._schema = schema
            self._session = session

        @property
        def schema(self) -> pa.Schema:
            return self._schema

        def _filter_columns(self, expression: Any) -> set[str]:
            """The columns ``expression`` reads: those without which it no longer binds."""
            needed = set()
            for field in self._schema:
                rest = pa.schema([f for f in self._schema if f.name != field.name])
                try:
                    pds.Scanner.from_batches(iter(()), schema=rest, filter=expression)
                except pa.ArrowException:
                    needed.add(field.name)
            return needed

        def scanner(self, columns: list[str] | None = None, filter: Any = None, **_: Any) -> pds.Scanner:
            wanted = set(columns if columns is not None else self._schema.names)
            if filter is not None:
                wanted |= self._filter_columns(filter)
            # a scan needs one column at least (count(*) asks for none)
            fields = [f for f in self._schema if f.name in wanted] or [self._schema.field(0)]
            sent = pa.schema(fields)
            batches = self._session.scan(self._name, sent.names)
            return pds.Scanner.from_batches(
                batches, schema=sent, columns=columns, filter=filter, use_threads=False, batch_readahead=0
            )

    return RemoteTable


def _connect_box(session: Session, hello: tuple[Any, ...], memory_limit: str) -> tuple[Any, dict[str, frozenset[str]]]:
    """An in-memory DuckDB with a view per table of the store over a :class:`RemoteTable`; the
    tables' column names (lower-case)."""
    import duckdb

    from tracescorer.store.duckdb import readonly

    _, catalog = hello
    con = duckdb.connect(config=_config(memory_limit))
    remote = _remote_table_class()
    columns: dict[str, frozenset[str]] = {}
    for name, schema_bytes in catalog:
        schema = pickle.loads(schema_bytes)
        con.register(name, remote(name, schema, session))  # a view of that name (in the temp catalog)
        columns[name.lower()] = frozenset(n.lower() for n in schema.names)
    readonly.lock_down(con)
    return con, columns


def _config(memory_limit: str) -> dict[str, Any]:
    return {
        "memory_limit": memory_limit,
        "threads": 1,
        "temp_directory": "",  # no spilling: a query fits its memory limit or fails
        "python_enable_replacements": False,  # no scans of this process's Python variables
        "arrow_lossless_conversion": True,
    }


def _warm_up(con: Any) -> None:
    """Load the code a query runs (DuckDB's and pyarrow's) before the address space is capped."""
    con.execute("SELECT count(*), max(i) FROM range(100000) t(i)").fetchall()


def _out_of_memory(message: str, memory_limit: str) -> str:
    first = message.strip().splitlines()[0] if message.strip() else message  # DuckDB's advice follows
    return (
        f"the query needs more memory than a query may take (store.query_memory_limit {memory_limit}); "
        f"narrow it (fewer rows or columns, a smaller result): {first}"
    )


def run(
    con: Any,
    session: Session | None,
    columns: dict[str, frozenset[str]] | None,
    request: tuple[Any, ...],
    memory_limit: str,
    max_result_bytes: int,
) -> tuple[Any, ...]:
    """Answer one ``("query", sql, params, max_rows, timeout_s)``; ``columns``: the store's tables
    in the box, None on a file."""
    from tracescorer.store.duckdb import pushdown, readonly

    _, sql, params, max_rows, timeout_s = request
    tables = None if columns is None else frozenset(columns)
    try:
        if session is not None and columns is not None:
            readonly.check_statement(con, sql, tables)
            tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0][0])
            session.pushdowns = pushdown.pushdowns(tree, columns, params)
        result = readonly.run_guarded(con, sql, max_rows=max_rows, timeout_s=timeout_s, tables=tables, params=params)
        size = len(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
    except readonly.QueryRefused as exc:
        return ("failed", "ReadOnlyViolation", str(exc))
    except readonly.QueryError as exc:
        message = str(exc)
        if "Out of Memory" in message:
            message = _out_of_memory(message, memory_limit)
        return ("failed", "StoreError", message)
    except MemoryError:
        return ("failed", "StoreError", _out_of_memory("MemoryError", memory_limit))
    finally:
        if session is not None:
            session.pushdowns = {}
    if size > max_result_bytes:
        return (
            "failed",
            "StoreError",
            f"the result is {size / 2**20:.1f} MiB, more than a query may return "
            f"({max_result_bytes / 2**20:.0f} MiB, store.query_max_result_bytes): fewer rows (a limit) or columns",
        )
    return ("result", result)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tracescorer-query")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--memory-limit", required=True)
    parser.add_argument("--max-result-bytes", type=int, required=True)
    parser.add_argument("--file", help="open this database read-only (no daemon holds it)")
    args = parser.parse_args(argv)
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C of the CLI is its own to handle
    chan = BlockingChannel(socket.socket(fileno=args.fd))
    session: Session | None = None
    columns: dict[str, frozenset[str]] | None = None
    if args.file:
        from tracescorer.store.duckdb import readonly

        try:
            con = readonly.connect(args.file, config=_config(args.memory_limit))
        except readonly.QueryError as exc:
            chan.send(("failed", "StoreLocked" if "lock" in str(exc).lower() else "StoreError", str(exc)))
            return
    else:
        # the pipeline's reads and writes come first (the box's thread that started it may be lower already)
        os.setpriority(os.PRIO_PROCESS, 0, max(10, os.getpriority(os.PRIO_PROCESS, 0)))
        hello = chan.recv()
        if hello is None:
            return
        session = Session(chan)
        con, columns = _connect_box(session, hello, args.memory_limit)
    _warm_up(con)
    cap_address_space(size_bytes(args.memory_limit))
    chan.send(("ready", os.getpid()))
    while (request := chan.recv()) is not None:
        chan.send(run(con, session, columns, request, args.memory_limit, args.max_result_bytes))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
