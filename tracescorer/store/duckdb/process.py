"""The daemon's side of the DuckDB store process: starting it, talking to it, restarting it.

:class:`StoreProcess` starts the store process (:mod:`tracescorer.store.duckdb.server`), sends it
telemetry, write jobs and reads over a socketpair, and resolves each request's future when the
answer comes back — a telemetry append only after its transaction committed. Intake of telemetry
is bounded by a count of items not yet committed (:class:`QueueFull` beyond it); the pipeline's
own writes are never refused, because each comes from a stage with its own bound.

If the store process dies, every pending request fails (nothing unacknowledged is reported as
stored) and a new process is started; requests fail with :class:`StoreError` until it is up.

Worker processes talk to the same store process directly: :meth:`StoreProcess.attach` gives a
socket for a new channel of the store process (:mod:`tracescorer.store.duckdb.clients`), which the
caller hands to a worker. There ``StoreProcess(path, attach_fd=fd)`` is a client over that channel:
it never starts, restarts or stops the store process; its :meth:`~StoreProcess.stop` waits for
its own requests and closes its channel, and when the channel ends unexpectedly (the store
process died or stopped) its requests fail and :attr:`~StoreProcess.lost` is set: the worker
exits, and the daemon starts it again with a fresh channel.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tracescorer import logs
from tracescorer.ipc import AsyncChannel, encode
from tracescorer.lifecycle import seconds_left
from tracescorer.store.api import DataError, QueryResult, ReadOnlyViolation, StoreClosed, StoreError, StoreUnavailable
from tracescorer.store.duckdb import wire
from tracescorer.store.duckdb.jobs import Jobs
from tracescorer.store.errors import DiskFull

log = logging.getLogger(__name__)
T = TypeVar("T")

_ERRORS: dict[str, type[StoreError]] = {
    "StoreError": StoreError,
    "DataError": DataError,
    "ReadOnlyViolation": ReadOnlyViolation,
    "StoreClosed": StoreClosed,
    "StoreUnavailable": StoreUnavailable,
}


class CommitObserver(Protocol):
    """Told about every committed transaction (on the event loop; must not block)."""

    def on_commit(self, seconds: float, spans: int, logs: int) -> None: ...

    def on_checkpoint(self, database: str, seconds: float) -> None:
        """A checkpoint of ``database`` (``main`` or ``span_log``) finished."""

    def on_error(self, error: BaseException) -> None: ...


class _NullObserver:
    def on_commit(self, seconds: float, spans: int, logs: int) -> None:
        pass

    def on_checkpoint(self, database: str, seconds: float) -> None:
        pass

    def on_error(self, error: BaseException) -> None:
        pass


class StoreProcess(Jobs):
    """A DuckDB database file served by a store process (see the module docstring)."""

    def __init__(
        self,
        path: str | Path,
        *,
        max_queue_items: int = 50_000,
        max_batch_items: int = 20_000,
        observer: CommitObserver | None = None,
        memory_limit: str = "1GB",
        checkpoint_threshold: str = "256MB",
        compression: str = "zstd",
        threads: int | None = 1,
        readers: int = 2,
        results_delay_s: float = 0.0,
        min_free_bytes: int = 32 << 20,
        query_max_concurrent: int = 2,
        query_memory_limit: str = "512MB",
        query_max_result_bytes: int = 64 << 20,
        query_grace_s: float = 2.0,
        duckdb_settings: Mapping[str, str] | None = None,
        attach_fd: int | None = None,
        segment_log: str | None = None,
    ) -> None:
        self.path = str(path)
        self.max_queue_items = max_queue_items
        self._options = wire.EngineOptions(
            path=self.path,
            memory_limit=memory_limit,
            checkpoint_threshold=checkpoint_threshold,
            max_batch_items=max_batch_items,
            readers=readers,
            compression=compression,
            duckdb_threads=threads,
            results_delay_s=results_delay_s,
            min_free_bytes=min_free_bytes,
            query_max_concurrent=query_max_concurrent,
            query_memory_limit=query_memory_limit,
            query_max_result_bytes=query_max_result_bytes,
            query_grace_s=query_grace_s,
            segment_log=segment_log,
            settings=dict(duckdb_settings or {}),
        )
        self._observer: CommitObserver = observer or _NullObserver()
        self._ids = itertools.count(1)
        self._futures: dict[int, tuple[asyncio.Future[Any], int]] = {}
        self._pending_items = 0
        self._channel: AsyncChannel | None = None
        self._process: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._restarter: asyncio.Task[None] | None = None
        self._closing = False
        self._open = False
        self._failure: str | None = None
        self._closed: asyncio.Future[bool] | None = None
        #: an attached client: the inherited descriptor of its channel (None: the daemon's own client)
        self._attach_fd = attach_fd
        self._attach_sock: socket.socket | None = None  # the daemon's: channel ends go to the store process
        #: set when an attached client's channel ended while it was not stopping (the store process is gone)
        self.lost = asyncio.Event()

    async def start(self) -> None:
        """Start the store process and wait until the database is open and migrated (an attached
        client: open its channel and wait for the store process's hello)."""
        try:
            if self._attach_fd is not None:
                await self._open_attached(self._attach_fd)
            else:
                await self._start_process()
        except StoreError:
            raise
        except OSError as exc:
            raise StoreError(f"cannot start the store process for {self.path}: {exc}") from None
        self._open = True

    async def _open_attached(self, fd: int) -> None:
        channel = await AsyncChannel.open(socket.socket(fileno=fd))
        first = await channel.recv()
        if first is None or not first[1]:
            channel.close()
            raise StoreError(f"the store process of {self.path} is not serving this channel")
        self._channel = channel
        self._closed = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read_replies(channel), name="store-replies")
        log.debug("attached to store process %s serving %s", first[2], self.path)

    @property
    def attached(self) -> bool:
        """Whether this client is a worker's, over a channel of another process's store process."""
        return self._attach_fd is not None

    def attach(self) -> socket.socket:
        """A socket for a new channel of the running store process, for another process (a worker)
        to build ``StoreProcess(path, attach_fd=...)`` on: pass it with ``pass_fds`` and close this
        copy. Raises :class:`StoreError` when the store process is not up."""
        sock = self._attach_sock
        if self._attach_fd is not None or sock is None or self._channel is None or self._closing:
            raise StoreError(
                "the store process is not up" if self._attach_fd is None else "an attached client cannot attach"
            )
        theirs, ours = socket.socketpair()
        try:
            socket.send_fds(sock, [b"a"], [theirs.fileno()])
        except OSError as exc:
            ours.close()
            raise StoreError(f"cannot attach to the store process: {exc}") from None
        finally:
            theirs.close()  # the store process has its own copy now (or none: ours then ends at once)
        return ours

    async def _start_process(self) -> None:
        parent, child = socket.socketpair()
        attach_parent, attach_child = socket.socketpair()
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tracescorer.store.duckdb.server",
                "--fd",
                str(child.fileno()),
                "--attach-fd",
                str(attach_child.fileno()),
                "--options",
                json.dumps(self._options.to_json()),
                "--log-level",
                logging.getLevelName(log.getEffectiveLevel()),
                "--log-format",
                logs.current_format(),
                pass_fds=(child.fileno(), attach_child.fileno()),
                stdin=asyncio.subprocess.DEVNULL,
            )
        except BaseException:
            attach_parent.close()
            raise
        finally:
            child.close()
            attach_child.close()
        channel = await AsyncChannel.open(parent)
        first = await channel.recv()
        if first is None or not first[1]:
            channel.close()
            attach_parent.close()
            await process.wait()
            if first is not None and first[2].kind == "DiskFull":
                raise DiskFull(first[2].message)  # it names the file and its disk's free space
            why = first[2].message if first is not None else f"the store process exited ({process.returncode})"
            raise StoreError(f"cannot open database {self.path}: {why}")
        self._channel, self._process = channel, process
        if self._attach_sock is not None:
            self._attach_sock.close()  # the previous store process's
        self._attach_sock = attach_parent
        self._closed = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read_replies(channel), name="store-replies")
        log.debug("store process %s serving %s", first[2], self.path)

    async def stop(self, deadline: float | None = None) -> bool:
        """Stop intake, commit what is queued (until ``deadline``, monotonic seconds; default 30 s
        from now), checkpoint, close."""
        if self._closing:
            return True
        self._closing = True
        timeout_s = 30.0 if deadline is None else seconds_left(deadline)
        if self._attach_fd is not None:
            return await self._detach(timeout_s)
        if self._attach_sock is not None:
            self._attach_sock.close()  # no more channels; those attached end with the process
            self._attach_sock = None
        if self._restarter is not None:
            self._restarter.cancel()
        channel, closed = self._channel, self._closed
        drained = True
        if channel is not None and closed is not None and not closed.done():
            channel.send(encode((0, wire.CLOSE, timeout_s)))
            try:
                drained = await asyncio.wait_for(asyncio.shield(closed), timeout_s + 10)
            except TimeoutError:
                drained = False
        if self._process is not None:
            try:
                await asyncio.wait_for(self._process.wait(), 10)
            except TimeoutError:
                log.error("store process did not exit; killing it")
                self._process.kill()
                await self._process.wait()
        return self._closed_down(channel, bool(drained), f"store did not drain within {timeout_s:.1f}s")

    async def _detach(self, timeout_s: float) -> bool:
        """An attached client's stop: wait for its own requests, then close its channel (without
        ``close``: the store process goes on serving the others)."""
        pending = [future for future, _ in self._futures.values()]
        drained = True
        if pending:
            _, late = await asyncio.wait(pending, timeout=timeout_s)
            drained = not late
        channel, self._channel = self._channel, None
        return self._closed_down(channel, drained, f"store requests not answered within {timeout_s:.1f}s")

    def _closed_down(self, channel: AsyncChannel | None, drained: bool, late: str) -> bool:
        """Close the channel and fail what is still pending; ``late`` is logged unless ``drained``."""
        if channel is not None:
            channel.close()
        if self._reader is not None:
            self._reader.cancel()
        self._fail_pending(StoreClosed("store is closed"))
        if not drained:
            log.error("%s", late)
        return drained

    @property
    def accepting(self) -> bool:
        return self._open and not self._closing and self._channel is not None

    @property
    def write_failure(self) -> str | None:
        return self._failure

    @property
    def process_pid(self) -> int | None:
        return None if self._process is None else int(self._process.pid)

    async def _request(self, kind: str, payload: Any, items: int = 0) -> Any:
        channel = self._channel
        if channel is None or self._closing:
            raise StoreClosed("store is shutting down" if self._closing else "store is not open")
        req_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._futures[req_id] = (future, items)
        self._pending_items += items
        channel.send(encode((req_id, kind, payload)))
        return await future

    async def _read_replies(self, channel: AsyncChannel) -> None:
        while (message := await channel.recv()) is not None:
            req_id, ok, value, meta = message
            if req_id == -1:
                if self._closed is not None and not self._closed.done():
                    self._closed.set_result(bool(ok))
                return
            self._observe(meta)
            entry = self._futures.pop(req_id, None)
            if entry is None:
                continue
            future, items = entry
            self._pending_items -= items
            if future.done():
                continue
            if ok:
                future.set_result(value)
            else:
                error = _ERRORS.get(value.kind, StoreError)(value.message)
                future.set_exception(error)
        # end of stream without a goodbye: the store process died
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(False)
        self._channel = None
        self._failure = "the store process exited"
        self._fail_pending(StoreUnavailable("the store process exited; retry"))
        if self._attach_fd is not None:
            if not self._closing:
                log.error("the store process's channel ended: the store process is gone")
                self.lost.set()
            return
        if not self._closing:
            self._restarter = asyncio.create_task(self._restart(), name="store-restart")

    async def _restart(self) -> None:
        status = None
        if self._process is not None:
            try:
                status = await asyncio.wait_for(self._process.wait(), 10)
            except TimeoutError:
                pass
        why = (
            " (DuckDB invalidated its database: see the store's error above)" if status == wire.EXIT_INVALIDATED else ""
        )
        log.error("store process exited unexpectedly with status %s%s; restarting it", status, why)
        delay = 0.5
        while not self._closing:
            try:
                await self._start_process()
                self._failure = None
                log.info("store process restarted")
                return
            except Exception as exc:  # noqa: BLE001 - keep trying; the daemon reports not ready meanwhile
                log.error("cannot restart the store process: %s", exc)
                await asyncio.sleep(delay)
                delay = min(10.0, delay * 2)

    def _observe(self, meta: dict[str, Any]) -> None:
        if not meta:
            return
        failing = meta.get("failing")
        if failing != self._failure:
            if failing is not None:
                self._observer.on_error(StoreError(failing))
            self._failure = failing
        for database, seconds in meta.get("checkpoints", ()):
            self._observer.on_checkpoint(database, seconds)
        if "commit_s" in meta:  # one reply of a commit's carries it (its jobs may be several clients')
            self._observer.on_commit(meta["commit_s"], meta.get("spans", 0), meta.get("logs", 0))

    def _fail_pending(self, error: StoreError) -> None:
        futures, self._futures = self._futures, {}
        self._pending_items = 0
        for future, _ in futures.values():
            if not future.done():
                future.set_exception(error)

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(connection, *args)`` in the store process inside a group-committed write
        transaction; returns its result once committed. ``fn`` must be a module-level function
        and ``args`` picklable."""
        result: T = await self._request(wire.WRITE, (fn, args))
        return result

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(cursor, *args)`` on a read cursor of the store process (committed data only)."""
        result: T = await self._request(wire.READ, (fn, args))
        return result

    async def query(self, sql: str, *, max_rows: int, timeout_s: float, params: Sequence[Any] = ()) -> QueryResult:
        result: QueryResult = await self._request(wire.QUERY, (sql, max_rows, timeout_s, list(params)))
        return result
