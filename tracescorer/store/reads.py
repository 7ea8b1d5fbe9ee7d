"""The product's own reads (the read commands, the report, the agreement gauges, label targets):
typed calls that run the store's own SQL on the store's readers.

Each read is one declaration of :mod:`tracescorer.store.queries`, :mod:`~tracescorer.store.label_queries`
or :mod:`~tracescorer.store.report_queries` (a function returning a
:class:`~tracescorer.store.statement.Query`), and :class:`ReadStore` has a method of the same name
and arguments for it that returns its rows as a :class:`~tracescorer.store.outcomes.QueryResult`
(columns by name, plain values; ``truncated`` only for a read given a ``limit``). These reads never
take the path of users' SQL (no query process, no statement guard, no ``store.query_max_rows``):
the SQL is the product's, bounded by its grouping or its ``limit``.

:class:`StoreReads` runs a read on one of two :class:`RowSource`: the span log's (``spans``,
``log_records``, ``assembled_traces``, ``skipped_traces``: the daemon's DuckDB file) or the
results' (every other table: the same file, or PostgreSQL). A source is the DuckDB store process's
readers (:mod:`tracescorer.store.duckdb.reads`), the PostgreSQL pool
(:mod:`tracescorer.store.postgres.reads`), or, for a read command with no daemon running, the file
opened read-only and a connection of the command's own. With a daemon running a read command sends
the read by name to the ops API, which runs it with :meth:`ReadStore.perform_named` (arguments as
JSON gave them, checked against the declaration's types).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, Protocol

from tracescorer.store import label_queries, queries, report_queries
from tracescorer.store.outcomes import QueryResult
from tracescorer.store.statement import Query

P = ParamSpec("P")
SPAN_LOG, RESULTS = "span_log", "results"


class RowSource(Protocol):
    """Where reads run: an engine's readers (a coroutine on the event loop, never blocking it)."""

    async def fetch_rows(self, query: Query) -> QueryResult:
        """The rows of one of the store's own SELECTs (built under :mod:`tracescorer.store`, never
        a user's), at most ``query.limit`` (``truncated`` when more); raises ``StoreError``."""


@dataclass(frozen=True, slots=True)
class Read:
    """One typed read: its name (its declaration's), the side it reads, its declaration."""

    name: str
    side: str
    build: Callable[..., Query]


#: every typed read by name (what the ops API serves)
READS: dict[str, Read] = {}


def _read(
    side: str, build: Callable[P, Query]
) -> Callable[Concatenate[ReadStore, P], Coroutine[Any, Any, QueryResult]]:
    """The :class:`ReadStore` method of a declaration: same name, arguments and docstring."""
    read = Read(build.__name__, side, build)
    if read.name in READS:
        raise ValueError(f"two reads named {read.name}")
    READS[read.name] = read
    signature = inspect.signature(build)

    async def method(self: ReadStore, /, *args: P.args, **kwargs: P.kwargs) -> QueryResult:
        return await self.perform(read, signature.bind(*args, **kwargs).arguments)

    method.__name__ = method.__qualname__ = read.name
    method.__doc__ = build.__doc__
    return method


class ReadStore:
    """The read side's part of the store: a typed read per declaration (see the module
    docstring); :meth:`perform` is where an implementation runs them."""

    # ids a command takes: trace, run, conversation or score ids, whole or as prefixes
    ids_equal = _read(RESULTS, queries.ids_equal)
    ids_starting = _read(RESULTS, queries.ids_starting)
    assembled_trace_ids = _read(SPAN_LOG, queries.assembled_trace_ids)
    score_target = _read(RESULTS, queries.score_target)
    runs_of = _read(RESULTS, queries.runs_of)
    # runs, scores, explain
    runs = _read(RESULTS, queries.runs)
    unmatched_traces = _read(SPAN_LOG, queries.unmatched_traces)
    skipped_traces_count = _read(SPAN_LOG, queries.skipped_traces_count)
    skipped_trace = _read(SPAN_LOG, queries.skipped_trace)
    assembled_trace = _read(SPAN_LOG, queries.assembled_trace)
    trace_spans_summary = _read(SPAN_LOG, queries.trace_spans_summary)
    scores = _read(RESULTS, queries.scores)
    trace_runs = _read(RESULTS, queries.trace_runs)
    conversation_runs = _read(RESULTS, queries.conversation_runs)
    decisions = _read(RESULTS, queries.decisions)
    # other tools' evaluations, labels, agreement
    evaluations = _read(RESULTS, label_queries.evaluations)
    external_as_scores = _read(RESULTS, label_queries.external_as_scores)
    external_for_targets = _read(RESULTS, label_queries.external_for_targets)
    external_summary = _read(RESULTS, label_queries.external_summary)
    run_traces = _read(RESULTS, label_queries.run_traces)
    target_runs = _read(RESULTS, label_queries.target_runs)
    labelled_scorers = _read(RESULTS, label_queries.labelled_scorers)
    labels_for = _read(RESULTS, label_queries.labels_for)
    judge_scores = _read(RESULTS, label_queries.judge_scores)
    judge_evaluations = _read(RESULTS, label_queries.judge_evaluations)
    scorer_has_scores = _read(RESULTS, label_queries.scorer_has_scores)
    calibration_tables = _read(RESULTS, label_queries.calibration_tables)
    version_trend = _read(RESULTS, label_queries.version_trend)
    # the report
    report_summary = _read(RESULTS, report_queries.report_summary)
    report_trend = _read(RESULTS, report_queries.report_trend)
    report_distribution = _read(RESULTS, report_queries.report_distribution)
    report_worst = _read(RESULTS, report_queries.report_worst)
    report_errors = _read(RESULTS, report_queries.report_errors)
    report_transcripts = _read(RESULTS, report_queries.report_transcripts)
    # monitors
    monitor_tables = _read(RESULTS, queries.monitor_tables)
    monitor_states = _read(RESULTS, queries.monitor_states)
    monitor_events = _read(RESULTS, queries.monitor_events)

    async def perform(self, read: Read, arguments: Mapping[str, Any]) -> QueryResult:
        """Run ``read`` with these arguments (by name); raises ``StoreError`` (and the
        declaration's ``ValueError``/``KeyError`` for arguments it refuses)."""
        raise NotImplementedError

    async def perform_named(self, name: str, kwargs: Mapping[str, Any]) -> QueryResult:
        """The read of this name, its arguments by name as JSON gave them (times as ISO 8601 text,
        tuples as lists), checked and converted to the declaration's types. Raises ValueError for
        an unknown read or argument, or a value of the wrong type."""
        read = READS.get(name)
        if read is None:
            raise ValueError(f"no read is named {name!r}")
        return await self.perform(read, {key: _checked(read, key, value) for key, value in kwargs.items()})


def _checked(read: Read, name: str, value: Any) -> Any:
    return _adapter(read.name, name).validate_python(value)


@functools.cache
def _adapter(read_name: str, argument: str) -> Any:
    from pydantic import TypeAdapter

    hints = typing.get_type_hints(READS[read_name].build)
    if argument not in inspect.signature(READS[read_name].build).parameters:
        raise ValueError(f"read {read_name!r} takes no argument {argument!r}")
    return TypeAdapter(hints[argument])


class StoreReads(ReadStore):
    """Reads on the store: the span log's on ``span_log``, the others on ``results`` (the same
    engine, or results in PostgreSQL beside a DuckDB span log)."""

    def __init__(self, *, span_log: RowSource, results: RowSource) -> None:
        self._span_log = span_log
        self._results = results

    async def perform(self, read: Read, arguments: Mapping[str, Any]) -> QueryResult:
        source = self._span_log if read.side == SPAN_LOG else self._results
        return await source.fetch_rows(read.build(**arguments))
