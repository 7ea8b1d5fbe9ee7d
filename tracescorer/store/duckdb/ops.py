"""The DuckDB store's domain operations, run inside the store process.

Each is a plain function ``op(con, *args)`` of picklable arguments returning plain data: the
daemon's :class:`~tracescorer.store.duckdb.store.DuckDBStore` sends the function (by name) and its
arguments; writes run inside the writer's group-committed transaction, reads on a reader cursor.
Rows travel as tuples and JSON text: turning them into domain objects is the daemon's job.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tracescorer.store.duckdb import rows as span_rows
from tracescorer.store.duckdb.upsert import chunks, key_in, upsert
from tracescorer.store.runs import RUN_SELECT, upsert_run_rows
from tracescorer.store.schema import ASSEMBLED_COLUMNS, RUN_COLUMNS, column_names
from tracescorer.store.scores import DECISION_FIELDS, SCORE_FIELDS

Row = tuple[Any, ...]
F = TypeVar("F", bound=Callable[..., Any])


def coalescable(fn: F) -> F:
    """Mark a write whose arguments are all lists: the store process runs the jobs of one group
    commit that call it as one call on the concatenated lists (a statement costs ~2 ms however
    few rows it writes)."""
    fn.coalescable = True  # type: ignore[attr-defined]
    return fn


def hinted(count: int = 1) -> Callable[[F], F]:
    """Mark a write whose last ``count`` arguments list, per row of a table, whether the caller
    believes the row's key is not stored yet (a trace assembled for the first time): such rows
    are inserted without looking their key up. A wrong belief (a restart forgot the trace was
    assembled) fails the insert on the primary key; the writer then runs the job again with no
    beliefs."""

    def mark(fn: F) -> F:
        fn.hinted = count  # type: ignore[attr-defined]
        return fn

    return mark


def alone(fn: F) -> F:
    """Mark a write that runs in a transaction of its own, never batched with others: it writes a
    span log, and a DuckDB transaction writes one database file only."""
    fn.alone = True  # type: ignore[attr-defined]
    return fn


# --- span log -------------------------------------------------------------------------------------


def _received(bounds: tuple[float, float] | None) -> tuple[str, list[Any]]:
    # received_at is the commit time and rows are appended in that order: with the exact range
    # DuckDB skips every row group and vector outside it (a read of a few traces otherwise
    # decompresses every span of the log: ~250 ms per 100k spans, against ~8 ms)
    if bounds is None:
        return "", []
    return " AND received_at BETWEEN to_timestamp(?) AND to_timestamp(?)", [bounds[0], bounds[1]]


def load_traces(
    con: Any, trace_ids: Sequence[str], received: tuple[float, float] | None
) -> dict[str, tuple[list[Row], list[Row]]]:
    """Span and log rows (``rows.SPAN_SELECT`` / ``LOG_SELECT`` order) of the given traces,
    received in the given range (epoch seconds) when one is given."""
    out: dict[str, tuple[list[Row], list[Row]]] = {t: ([], []) for t in trace_ids}
    if not trace_ids:
        return out
    extra, params = _received(received)
    ids = [list(trace_ids)]
    for row in con.execute(
        span_rows.SPAN_SELECT + " WHERE trace_id IN (SELECT unnest(?::VARCHAR[]))" + extra, ids + params
    ).fetchall():
        out[row[0]][0].append(row)
    for row in con.execute(
        span_rows.LOG_SELECT + " WHERE trace_id IN (SELECT unnest(?::VARCHAR[]))" + extra, ids + params
    ).fetchall():
        out[row[7]][1].append(row)
    return out


_PENDING_SQL = """
WITH latest AS (
  SELECT trace_id, min(received_at) AS first_received, max(received_at) AS last_received
  FROM spans WHERE received_at >= ? GROUP BY trace_id
  UNION ALL
  SELECT trace_id, min(received_at), max(received_at)
  FROM log_records WHERE trace_id IS NOT NULL AND received_at >= ? GROUP BY trace_id
), per AS (
  SELECT trace_id, min(first_received) AS first_received, max(last_received) AS last_received
  FROM latest GROUP BY trace_id
)
SELECT per.trace_id, epoch(per.first_received), epoch(per.last_received), a.trace_id IS NOT NULL
FROM per LEFT JOIN assembled_traces a USING (trace_id)
WHERE a.trace_id IS NULL OR per.last_received > coalesce(a.last_received_at, a.assembled_at)
ORDER BY per.last_received
LIMIT ?
"""


def pending_traces(con: Any, since: dt.datetime, limit: int) -> list[tuple[str, float, float, bool]]:
    """Traces with items received since ``since`` that were never assembled, or received items
    after their assembly, oldest first: (trace id, first and last such item received (epoch s),
    assembled before)."""
    return [
        (r[0], float(r[1]), float(r[2]), bool(r[3]))
        for r in con.execute(_PENDING_SQL, [since, since, limit]).fetchall()
    ]


def assembled_before(con: Any, trace_ids: Sequence[str]) -> list[str]:
    found: list[str] = []
    for part in chunks(list(trace_ids)):  # through the key's index, not a scan of every record
        found += [
            r[0]
            for r in con.execute(
                f"SELECT trace_id FROM assembled_traces WHERE {key_in('trace_id', len(part))}", part
            ).fetchall()
        ]
    return found


def read_marker(con: Any, key: str) -> str | None:
    rows = con.execute("SELECT value FROM schema_info WHERE key = ?", [key]).fetchall()
    return str(rows[0][0]) if rows else None


def write_marker(con: Any, key: str, value: str) -> None:
    con.execute("INSERT OR REPLACE INTO schema_info VALUES (?, ?)", [key, value])


_ASSEMBLED = [c for c in column_names(ASSEMBLED_COLUMNS) if c != "assembled_at"]


@coalescable
@hinted()
def record_assembly(con: Any, records: Sequence[Row], new: Sequence[bool]) -> int:
    """Upsert ``assembled_traces`` rows (values in record field order)."""
    return upsert(
        con,
        "assembled_traces",
        _ASSEMBLED,
        "trace_id",
        records,
        expressions={"last_received_at": "to_timestamp({})"},
        stamps={"assembled_at": "now()"},
        new=new,
    )


@alone
def prune_spans(con: Any, catalog: str, older_than: dt.datetime) -> dict[str, int]:
    """Delete the rows of one span log (a transaction writes one file) received before ``older_than``."""
    return _delete_before(
        con,
        ((f"{catalog}.spans", "spans", "received_at"), (f"{catalog}.log_records", "log_records", "received_at")),
        older_than,
    )


def prune_assembled(con: Any, older_than: dt.datetime) -> dict[str, int]:
    """Delete assembly records older than ``older_than`` (after :func:`prune_spans`: a trace
    whose spans are still there is never taken for unassembled)."""
    return _delete_before(con, (("assembled_traces", "assembled_traces", "assembled_at"),), older_than)


def _delete_before(con: Any, tables: Sequence[tuple[str, str, str]], older_than: dt.datetime) -> dict[str, int]:
    deleted = {}
    for table, name, column in tables:
        rows = con.execute(f"DELETE FROM {table} WHERE {column} < ?", [older_than]).fetchall()
        deleted[name] = int(rows[0][0]) if rows else 0
    return deleted


# --- runs -----------------------------------------------------------------------------------------


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


# --- scores ---------------------------------------------------------------------------------------


@coalescable
@hinted(2)
def write_scores(
    con: Any, scores: Sequence[Row], decisions: Sequence[Row], new_scores: Sequence[bool], new_decisions: Sequence[bool]
) -> None:
    """Upsert score rows (``SCORE_FIELDS`` order) and decisions; a re-score is exported again."""
    upsert(
        con,
        "scores",
        SCORE_FIELDS,
        "id",
        scores,
        stamps={"created_at": "now()", "updated_at": "now()", "exported_at": "NULL"},
        keep=("created_at",),
        new=new_scores,
    )
    upsert(
        con, "scoring_decisions", DECISION_FIELDS, "id", decisions, stamps={"decided_at": "now()"}, new=new_decisions
    )


def spent_today(con: Any) -> float:
    row = con.execute(
        "SELECT coalesce(sum(judge_cost_usd), 0) FROM scores "
        "WHERE updated_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"
    ).fetchall()
    return float(row[0][0]) if row else 0.0


def unscored_recent(
    con: Any, run_scorers: Sequence[str], conversation_scorers: Sequence[str], window_s: float
) -> tuple[list[tuple[Row, list[str]]], list[tuple[str, list[str]]]]:
    """Runs updated in the window that some run scorer has not decided, and conversations whose
    newest run is newer than some conversation scorer's decision; each with the scorers that did
    decide."""
    since = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=window_s)
    runs: list[tuple[Row, list[str]]] = []
    if run_scorers:
        n = len(RUN_COLUMNS)
        rows = con.execute(
            "WITH dec AS (SELECT target_id, list(DISTINCT scorer_id) AS ids FROM scoring_decisions "
            "WHERE target_type = 'run' AND list_contains(?::VARCHAR[], scorer_id) AND target_id IN "
            "(SELECT run_id FROM runs WHERE updated_at >= ?) GROUP BY target_id) "
            + RUN_SELECT.replace(
                " FROM runs",
                ", coalesce(dec.ids, []::VARCHAR[]) FROM runs LEFT JOIN dec ON dec.target_id = runs.run_id",
            )
            + " WHERE updated_at >= ? AND len(coalesce(dec.ids, []::VARCHAR[])) < ? ORDER BY started_at_unix_nano",
            [list(run_scorers), since, since, len(set(run_scorers))],
        ).fetchall()
        runs = [(tuple(r[:n]), list(r[n])) for r in rows]
    conversations: list[tuple[str, list[str]]] = []
    if conversation_scorers:
        rows = con.execute(
            "WITH c AS (SELECT conversation_id, max(updated_at) AS last FROM runs WHERE conversation_id IS NOT NULL "
            "AND updated_at >= ? GROUP BY conversation_id) "
            "SELECT c.conversation_id, coalesce(list(DISTINCT d.scorer_id) FILTER (d.scorer_id IS NOT NULL), []) "
            "FROM c LEFT JOIN scoring_decisions d ON d.target_type = 'conversation' AND d.target_id = c.conversation_id "
            "AND d.decided_at >= c.last AND list_contains(?::VARCHAR[], d.scorer_id) "
            "GROUP BY c.conversation_id HAVING count(DISTINCT d.scorer_id) < ? ORDER BY min(c.last)",
            [since, list(conversation_scorers), len(set(conversation_scorers))],
        ).fetchall()
        conversations = [(r[0], list(r[1])) for r in rows]
    return runs, conversations
