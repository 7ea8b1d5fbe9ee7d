"""The calibration commands' SQL (``label``, ``agreement``, ``disagreements``, ``label-queue``, the
report's agreement section, the agreement gauges, external evaluations beside ``scores``), like
:mod:`tracescorer.store.queries`: one read-only SELECT per function, ``?`` parameters, SQL that DuckDB
and PostgreSQL share, each a typed read of :class:`tracescorer.store.reads.ReadStore`.

An external evaluation names the evaluated span; the run it is about is resolved here, when read
(the run may have been assembled after the evaluation arrived): the run whose agent span is the
evaluated span, else the outermost run of the trace (the earliest one whose parent span is no
other run's agent span).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from tracescorer.store.statement import SCORED_AT, TIME, Query, about_clause, glob_clause, placeholders
from tracescorer.store.tables import SCORE_COLUMNS

#: a score row's target, as labels name it
SCORE_TARGET_TYPE = "CASE WHEN s.entity_type = 'conversation' THEN 'conversation' ELSE 'run' END"
SCORE_TARGET_ID = "CASE WHEN s.entity_type = 'conversation' THEN s.conversation_id ELSE s.run_id END"


# --- label targets ------------------------------------------------------------------------------------


def target_runs(text: str) -> Query:
    """Runs a label target may name: by run id, trace id or conversation id (outermost runs first)."""
    return Query(
        "SELECT r.run_id, r.trace_id, r.span_id, r.conversation_id, r.agent_name, "
        "NOT EXISTS (SELECT 1 FROM runs p WHERE p.trace_id = r.trace_id AND p.span_id = r.parent_span_id) AS outermost "
        "FROM runs r WHERE r.run_id = ? OR r.trace_id = ? OR r.conversation_id = ? "
        "ORDER BY r.started_at_unix_nano, r.run_id",
        (text, text.lower(), text),
    )


def run_traces(run_ids: Sequence[str]) -> Query:
    """The traces of these runs."""
    return Query(
        f"SELECT DISTINCT trace_id FROM runs WHERE run_id IN ({placeholders(len(run_ids)) or 'NULL'})", tuple(run_ids)
    )


# --- external evaluations -----------------------------------------------------------------------------


def _evaluations_resolved(where: str) -> str:
    """External evaluations (``e``) matching ``where``, each with the run it is about (``run_id``)
    and that run's conversation and agent."""
    return (
        f"WITH e AS (SELECT * FROM evaluations{where}), "
        "top AS (SELECT trace_id, run_id, conversation_id, agent_name FROM (SELECT r.trace_id, r.run_id, "
        "r.conversation_id, r.agent_name, row_number() OVER (PARTITION BY r.trace_id ORDER BY "
        "r.started_at_unix_nano, r.run_id) AS k FROM runs r WHERE r.trace_id IN (SELECT trace_id FROM e) "
        "AND NOT EXISTS (SELECT 1 FROM runs p WHERE p.trace_id = r.trace_id AND p.span_id = r.parent_span_id)) "
        "AS ranked WHERE k = 1) "
        "SELECT e.*, coalesce(x.run_id, t.run_id) AS run_id, "
        "coalesce(e.conversation_id, x.conversation_id, t.conversation_id) AS run_conversation_id, "
        "coalesce(x.agent_name, t.agent_name) AS agent_name, "
        "CASE WHEN e.target_type = 'conversation' THEN e.conversation_id ELSE coalesce(x.run_id, t.run_id) END "
        "AS target_id FROM e LEFT JOIN runs x ON x.trace_id = e.trace_id AND x.span_id = e.span_id "
        "LEFT JOIN top t ON t.trace_id = e.trace_id"
    )


def _evaluations_where(name: str | None, since: dt.datetime | None) -> tuple[str, list[object]]:
    clauses: list[str] = []
    params: list[object] = []
    if name is not None:
        clauses.append("name = ?")
        params.append(name)
    if since is not None:
        clauses.append(f"received_at >= {TIME}")
        params.append(since.isoformat())
    return (f" WHERE {' AND '.join(clauses)}" if clauses else ""), params


def evaluations(*, name: str | None = None, since: dt.datetime | None = None) -> Query:
    """External evaluations (every column, and the resolved ``run_id``/``target_id``), oldest first."""
    where, params = _evaluations_where(name, since)
    return Query(f"SELECT * FROM ({_evaluations_resolved(where)}) AS resolved ORDER BY received_at, id", tuple(params))


_AS_SCORE = {
    "id": "id",
    "scorer_id": "name",
    "scorer_name": "name",
    "scorer_version": "evaluator_version",
    "run_id": "run_id",
    "trace_id": "trace_id",
    "span_id": "span_id",
    "conversation_id": "run_conversation_id",
    "entity_type": "CASE WHEN target_type = 'conversation' THEN 'conversation' ELSE 'agent' END",
    "entity_id": "agent_name",
    "source": "'external'",
    "score": "score",
    "reason": "explanation",
    "status": "CASE WHEN error_type IS NULL THEN 'ok' ELSE 'error' END",
    "error_type": "error_type",
    "label": "label",
    "created_at": "received_at",
    "updated_at": "received_at",
}


def external_as_scores(
    *,
    name: str | None = None,
    since: dt.datetime | None = None,
    status: str | None = None,
    label: str | None = None,
    agent: str | None = None,
    about: tuple[str, str] | None = None,
    all_columns: bool = False,
    limit: int | None = None,
) -> Query:
    """External evaluations in the shape of ``scores`` rows (``source = 'external'``), newest
    first like :func:`~tracescorer.store.queries.scores`: every column of the scores table, or
    the ``scores`` command's summary columns (``SCORE_SUMMARY_COLUMNS``). ``about`` is ``(kind,
    id)`` of a trace, run, conversation or evaluation, as for scores: a trace's or run's
    evaluations and those of its conversations; a conversation's and its runs'."""
    where, params = _evaluations_where(name, since)
    if all_columns:
        select = ", ".join(f"{_AS_SCORE.get(column, 'NULL')} AS {column}" for column, _ in SCORE_COLUMNS)
    else:
        select = (
            "received_at AS updated_at, name AS scorer_id, "
            f"{_AS_SCORE['entity_type']} AS entity_type, agent_name AS agent, id, run_id, trace_id, "
            f"run_conversation_id AS conversation_id, {_AS_SCORE['status']} AS status, score, label, "
            "NULL AS judge_cost_usd, explanation AS reason, error_type AS error, NULL AS target_ended_at, "
            "evaluator_version AS scorer_version"
        )
    outer: list[str] = []
    outer_params: list[object] = []
    if status:
        outer.append(f"{_AS_SCORE['status']} = ?")
        outer_params.append(status)
    if label:
        outer.append("label = ?")
        outer_params.append(label)
    if agent:
        clause, value = glob_clause("agent_name", agent)
        outer.append(clause)
        outer_params.append(value)
    if about:
        clause, ids = about_clause(*about, type_column="target_type", conversation_column="run_conversation_id")
        outer.append(clause)
        outer_params += ids
    cut = f" WHERE {' AND '.join(outer)}" if outer else ""
    return Query(
        f"SELECT {select} FROM ({_evaluations_resolved(where)}) AS resolved{cut} ORDER BY received_at DESC, id DESC",
        (*params, *outer_params),
        limit,
    )


def external_for_targets(trace_ids: Sequence[str], conversation_ids: Sequence[str]) -> Query:
    """External evaluations of these traces' runs and of these conversations (``explain``)."""
    clauses = []
    if trace_ids:
        clauses.append(f"trace_id IN ({placeholders(len(trace_ids))})")
    if conversation_ids:
        clauses.append(f"conversation_id IN ({placeholders(len(conversation_ids))})")
    where = f" WHERE {' OR '.join(clauses) or 'FALSE'}"
    return Query(
        "SELECT target_type, target_id, name, source, kind, score, label, explanation, error_type, evaluator_version, "
        f"received_at FROM ({_evaluations_resolved(where)}) AS resolved ORDER BY name, received_at",
        (*(t.lower() for t in trace_ids), *conversation_ids),
    )


# --- agreement ----------------------------------------------------------------------------------------


def _labelled(target_type: str, target_id: str) -> str:
    """A verdict's target has a label for the judge's id (the ``?``): only those pair."""
    return (
        " AND EXISTS (SELECT 1 FROM labels l WHERE l.scorer_id = ? "
        f"AND l.target_type = {target_type} AND l.target_id = {target_id})"
    )


def judge_scores(scorer_id: str, since: dt.datetime | None = None, labelled: bool = False) -> Query:
    """One tracescorer scorer's ok scores, by target (the judge side of agreement); ``labelled``:
    of the targets labelled for it only (those that pair with the labels)."""
    params: list[object] = [scorer_id]
    extra = ""
    if since is not None:
        extra = f" AND s.updated_at >= {TIME}"
        params.append(since.isoformat())
    if labelled:
        extra += _labelled(SCORE_TARGET_TYPE, SCORE_TARGET_ID)
        params.append(scorer_id)
    return Query(
        f"SELECT {SCORE_TARGET_TYPE} AS target_type, {SCORE_TARGET_ID} AS target_id, s.scorer_version AS version, "
        "s.score, s.label, s.threshold, s.reason, s.trace_id, s.run_id, s.conversation_id, s.entity_id AS agent, "
        "s.updated_at AS at FROM scores s "
        f"WHERE s.scorer_id = ? AND s.status = 'ok'{extra} ORDER BY s.updated_at, s.id",
        tuple(params),
    )


def judge_evaluations(name: str, since: dt.datetime | None = None, labelled: bool = False) -> Query:
    """One external evaluator's evaluations, by the target they resolve to (the same columns as
    :func:`judge_scores`; ``labelled``: as there, labels given for ``name``)."""
    params: list[object] = [name]
    extra = ""
    if since is not None:
        extra = f" AND received_at >= {TIME}"
        params.append(since.isoformat())
    paired = ""
    if labelled:
        paired = _labelled("resolved.target_type", "resolved.target_id")
        params.append(name)
    return Query(
        "SELECT target_type, target_id, evaluator_version AS version, score, label, NULL AS threshold, "
        "explanation AS reason, trace_id, run_id, run_conversation_id AS conversation_id, agent_name AS agent, "
        f"received_at AS at FROM ({_evaluations_resolved(f' WHERE name = ?{extra}')}) AS resolved "
        f"WHERE error_type IS NULL AND target_id IS NOT NULL{paired} ORDER BY received_at, id",
        tuple(params),
    )


def scorer_has_scores(scorer_id: str) -> Query:
    """Whether a scorer has any ok score (``found``): a judge id without is read as the external
    evaluator of that name."""
    return Query("SELECT EXISTS (SELECT 1 FROM scores WHERE scorer_id = ? AND status = 'ok') AS found", (scorer_id,))


def labels_for(scorer_id: str) -> Query:
    """Every human label given for ``scorer_id``."""
    return Query(
        "SELECT target_type, target_id, author, label, score, note, source, labelled_at, trace_id, conversation_id "
        "FROM labels WHERE scorer_id = ? ORDER BY labelled_at, id",
        (scorer_id,),
    )


def labelled_scorers() -> Query:
    """Scorer ids that have human labels, with how many (agreement gauges, report)."""
    return Query("SELECT scorer_id, count(*) AS n FROM labels GROUP BY scorer_id ORDER BY scorer_id")


def calibration_tables() -> Query:
    """Which of the calibration tables the store has (a database from before them, read offline, has not)."""
    return Query(
        "SELECT table_name FROM information_schema.tables WHERE table_name IN ('labels', 'evaluations', 'scores') "
        "GROUP BY table_name"
    )


def external_summary(since: dt.datetime) -> Query:
    """Per external evaluator and emitter: evaluations received since ``since``, mean score, labels used."""
    return Query(
        "SELECT name, source, count(*) AS n, avg(score) AS mean, count(DISTINCT label) AS labels, "
        f"max(received_at) AS last_at FROM evaluations WHERE received_at >= {TIME} "
        "GROUP BY name, source ORDER BY name, source",
        (since.isoformat(),),
    )


def version_trend(since: dt.datetime, scorer_id: str | None, bucket_s: int) -> Query:
    """Per scorer, version and time bucket of the scored time (as the report's trend): count,
    mean, pass rate and errors (a trend split by version)."""
    params: list[object] = [since.isoformat()]
    extra = ""
    if scorer_id is not None:
        extra = " AND scorer_id = ?"
        params.append(scorer_id)
    bucket = int(bucket_s)
    return Query(
        f"SELECT scorer_id, coalesce(scorer_version, '') AS version, (floor(EXTRACT(EPOCH FROM {SCORED_AT}) / {bucket}) "
        f"* {bucket})::BIGINT AS bucket, count(*) AS n, avg(score) FILTER (WHERE status = 'ok') AS mean, "
        "count(*) FILTER (WHERE label = 'pass') AS passed, count(*) FILTER (WHERE label = 'fail') AS failed, "
        f"count(*) FILTER (WHERE status = 'error') AS errors, min({SCORED_AT}) AS first_at, max({SCORED_AT}) AS last_at "
        f"FROM scores WHERE {SCORED_AT} >= {TIME}{extra} GROUP BY 1, 2, 3 ORDER BY scorer_id, bucket, version",
        tuple(params),
    )
