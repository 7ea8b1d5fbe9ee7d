"""The read commands' store: the product's typed reads (:class:`~tracescorer.store.api.ReadStore`),
each through the running daemon's ops API by name, or on the store directly when none runs (the file
opened read-only for the read; PostgreSQL connected, in postgres mode): the same call on both paths,
decided per read as for users' SQL (:func:`~tracescorer.commands.common.daemon_or_store`). Neither
path takes a query process nor ``store.query_max_rows``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from tracescorer import control
from tracescorer.commands.common import daemon_or_store
from tracescorer.output import jsonable
from tracescorer.store.api import QueryResult, Read, ReadStore

if TYPE_CHECKING:
    from tracescorer.config import Settings

T = TypeVar("T")


class CommandReads(ReadStore):
    """A read command's reads (see the module docstring); failures are ``click.ClickException``
    with the store's or the daemon's message."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._offline: ReadStore | None = None

    async def perform(self, read: Read, arguments: Mapping[str, Any]) -> QueryResult:
        def remote(info: control.ServeInfo) -> QueryResult:
            timeout_s = self._settings.store.query_timeout_s + 10
            answer = control.remote_read(info, read.name, jsonable(dict(arguments)), timeout_s=timeout_s)
            return QueryResult(
                columns=answer["columns"],
                types=answer["types"],
                rows=[tuple(row) for row in answer["rows"]],
                truncated=answer["truncated"],
            )

        return await daemon_or_store(self._settings, remote, lambda: self._store().perform(read, arguments))

    def _store(self) -> ReadStore:
        if self._offline is None:
            from tracescorer.store.factory import build_offline_reads

            self._offline = build_offline_reads(self._settings)
        return self._offline


def reading(settings: Settings, work: Callable[[ReadStore], Awaitable[T]]) -> T:
    """Run a command's reads: ``work`` with the command's :class:`CommandReads`."""

    async def run() -> T:
        return await work(CommandReads(settings))

    return asyncio.run(run())
