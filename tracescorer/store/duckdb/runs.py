"""The DuckDB store's runs part: runs upserted by assembly, read back by scoring and backfills."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from typing import Any

from tracescorer.model import AgentRun, Conversation
from tracescorer.store.duckdb.fresh import NewTraces
from tracescorer.store.duckdb.jobs import Jobs, Row, coalescable, hinted
from tracescorer.store.duckdb.upsert import chunks, key_in, upsert
from tracescorer.store.runs import DATA_COLUMNS, RUN_SELECT, run_from_row, run_to_row
from tracescorer.store.tables import RUN_COLUMNS


class RunsPart(Jobs):
    """:class:`~tracescorer.store.api.RunStore` on the store process."""

    _new_traces: NewTraces

    async def upsert_runs(
        self, runs: Sequence[AgentRun], *, replace_traces: Sequence[str] = (), new_traces: Collection[str] = ()
    ) -> None:
        new = set(new_traces)
        self._new_traces.assembled(new, [*replace_traces, *(r.trace_id for r in runs if r.trace_id not in new)])
        await self.write(
            upsert_runs, [run_to_row(r) for r in runs], list(replace_traces), [r.trace_id in new for r in runs]
        )

    async def load_runs(self, run_ids: Sequence[str]) -> list[AgentRun]:
        return [run_from_row(r) for r in await self.read(load_runs, list(run_ids))]

    async def load_conversation(self, conversation_id: str) -> Conversation | None:
        found = await self.read(load_conversation, conversation_id)
        runs = tuple(run_from_row(r) for r in found)
        return Conversation(conversation_id=conversation_id, runs=runs) if runs else None

    async def target_ids(self, scope: str, *, since: dt.datetime | None, until: dt.datetime | None) -> list[str]:
        return await self.read(target_ids, scope, since, until)


# --- run in the store process ------------------------------------------------------------------------


_TIME_COLUMNS = ("started_at", "ended_at")
#: the message and attribute columns: text of :func:`run_to_row`'s JSON encoder
_JSON_COLUMNS = frozenset(name for name, kind in RUN_COLUMNS if kind == "JSON")


def upsert_run_rows(con: Any, rows: Sequence[Sequence[Any]], new: Sequence[bool] | None = None) -> int:
    """Insert or update :func:`run_to_row` rows by ``run_id`` (store side); ``new``: see
    :func:`~tracescorer.store.duckdb.upsert.upsert`."""
    return upsert(
        con,
        "runs",
        DATA_COLUMNS,
        "run_id",
        rows,
        expressions=dict.fromkeys(_TIME_COLUMNS, "make_timestamp({})::TIMESTAMPTZ"),
        stamps={"created_at": "now()", "updated_at": "now()"},
        keep=("created_at",),
        new=new,
        json=_JSON_COLUMNS,
    )


@coalescable
@hinted()
def upsert_runs(con: Any, run_rows: Sequence[Row], replace_traces: Sequence[str], new: Sequence[bool]) -> int:
    """Upsert runs; for re-assembled traces drop runs that the new extraction no longer has
    (e.g. the root arrived late and the agent span changed)."""
    written = upsert_run_rows(con, run_rows, new)
    current = {r[0] for r in run_rows}
    stale: list[str] = []
    for part in chunks(list(replace_traces)):  # through the runs_trace index, not a scan of every run
        stale += [
            r[0]
            for r in con.execute(f"SELECT run_id FROM runs WHERE {key_in('trace_id', len(part))}", part).fetchall()
            if r[0] not in current
        ]
    for part in chunks(stale):
        con.execute(f"DELETE FROM runs WHERE {key_in('run_id', len(part))}", part)
    return written


def load_runs(con: Any, run_ids: Sequence[str]) -> list[Row]:
    return [
        tuple(r)
        for r in con.execute(
            RUN_SELECT + " WHERE run_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY started_at_unix_nano, run_id",
            [list(run_ids)],
        ).fetchall()
    ]


def load_conversation(con: Any, conversation_id: str) -> list[Row]:
    return [
        tuple(r)
        for r in con.execute(
            RUN_SELECT + " WHERE conversation_id = ? ORDER BY started_at_unix_nano, run_id", [conversation_id]
        ).fetchall()
    ]


def target_ids(con: Any, scope: str, since: dt.datetime | None, until: dt.datetime | None) -> list[str]:
    clauses, params = [], []
    if since is not None:
        clauses.append("started_at >= ?")
        params.append(since)
    if until is not None:
        clauses.append("started_at < ?")
        params.append(until)
    where = " AND ".join(clauses) or "TRUE"
    if scope == "run":
        sql = f"SELECT run_id FROM runs WHERE {where} ORDER BY started_at_unix_nano, run_id"
    else:
        sql = (
            f"SELECT conversation_id FROM runs WHERE conversation_id IS NOT NULL AND {where} "
            "GROUP BY conversation_id ORDER BY min(started_at_unix_nano)"
        )
    return [r[0] for r in con.execute(sql, params).fetchall()]
