"""Score, decision and assembly rows, each declared once: the table columns derive from these.

Plain frozen dataclasses; the store turns their fields into column lists (``field(metadata=...)``
names a SQL type where the Python type does not say it) and instances into row values.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from tracescorer.slotted import stored_through_slots

#: JSON-typed fields hold plain data (step results may be pydantic models or dataclasses).
JSON = {"sql": "JSON"}


def _sql(kind: str) -> dict[str, str]:
    return {"sql": kind}


@stored_through_slots
@dataclass(frozen=True, slots=True, kw_only=True)
class ScoreRecord:
    """One row of ``scores``: one (scorer, target) pair; re-scoring upserts the same ``id``.

    Columns follow Mastra's score row (docs/architecture.md); ``label``, ``threshold``,
    ``error_type``, ``target_ended_at``, ``scorer_version``, ``error_class`` and ``heal_attempts`` are additions. ``created_at``/``updated_at``/
    ``exported_at`` are set by the store.
    """

    id: str
    scorer_id: str
    scorer_name: str
    # a stable hash of what defines the binding (tracescorer.runner.versions): a changed prompt,
    # judge model, criterion or threshold is a new version
    scorer_version: str | None = None
    run_id: str | None
    trace_id: str | None
    span_id: str | None
    conversation_id: str | None
    entity_type: str  # agent | conversation
    entity_id: str | None  # agent name
    source: str  # live | backfill
    score: float | None
    reason: str | None
    status: str  # ok | error | not_scorable
    error: str | None = None
    error_type: str | None = None
    label: str | None = None  # pass | fail when the binding has a threshold
    threshold: float | None = None
    preprocess_step_result: Any = field(default=None, metadata=JSON)
    analyze_step_result: Any = field(default=None, metadata=JSON)
    preprocess_prompt: str | None = None
    analyze_prompt: str | None = None
    generate_score_prompt: str | None = None
    generate_reason_prompt: str | None = None
    judge_model: str | None = None
    judge_input_tokens: int | None = None
    judge_output_tokens: int | None = None
    judge_cost_usd: float | None = None
    judge_attempts: int | None = field(default=None, metadata=_sql("INTEGER"))
    duration_ms: float | None = None
    sample_rate: float | None = None
    metadata: dict[str, Any] | None = field(default=None, metadata=JSON)
    # when what was scored happened (epoch microseconds): the run's end, a conversation's last
    # turn. History is keyed on it, so re-scoring (a backfill) does not move a score in time.
    target_ended_at: int | None = field(default=None, metadata=_sql("TIMESTAMPTZ"))
    # an error row's kind (tracescorer.runner.heal_policy): transient errors (the judge was
    # unreachable, overloaded or timed out) are re-scored by the healer; the others are not
    error_class: str | None = None  # transient | permanent | output
    # how many automatic re-scores this row went through (the healer's count; 0 or None: none)
    heal_attempts: int | None = field(default=None, metadata=_sql("INTEGER"))
    # a conversation score of a claimed scoring: the conversation's activity seq its claim was for.
    # The store keeps the row of the newer activity (a late write of a lost claim loses); a row
    # without one (heal, backfill, one daemon) replaces and keeps the stored seq
    activity_seq: int | None = field(default=None, metadata=_sql("BIGINT"))
    # judge calls answered by an earlier verdict of the same request under the same scorer version
    # (no request made, nothing spent; judge_calls in metadata name where each came from)
    judge_reused: int | None = field(default=None, metadata=_sql("INTEGER"))


@stored_through_slots
@dataclass(frozen=True, slots=True, kw_only=True)
class VerdictRecord:
    """One row of ``judge_verdicts``: a judge's reply to one request, reused for the same request
    (``input_hash``, :func:`tracescorer.scorers.reuse.request_key`) under the same scorer version
    within ``judge.reuse_max_age_s``. ``judged_at`` is set by the store."""

    input_hash: str
    scorer_version: str
    scorer_id: str
    model: str
    raw_output: str  # the model's text, before the judge's output processors
    score_id: str | None  # the score it was judged for


@stored_through_slots
@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionRecord:
    """One row of ``scoring_decisions``: the latest decision for a (scorer, target) pair."""

    id: str
    scorer_id: str
    target_type: str  # run | conversation
    target_id: str  # run id or conversation id
    trace_id: str | None
    conversation_id: str | None
    # scored | sampled_out | filtered_out | not_scorable | rate_limited | budget_exhausted | failed
    decision: str
    detail: str | None
    sample_rate: float | None
    source: str
    score_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AssemblyRecord:
    """One row of ``assembled_traces``: when and how a trace was assembled (powers
    ``runs --unmatched`` and restart recovery)."""

    trace_id: str
    reason: str
    incomplete: bool
    span_count: int = field(metadata=_sql("INTEGER"))
    log_count: int = field(metadata=_sql("INTEGER"))
    run_count: int = field(metadata=_sql("INTEGER"))
    unmatched_reason: str | None
    service_name: str | None
    root_name: str | None
    # the newest item assembled (epoch s): items received later make the trace pending again
    last_received_at: float | None = field(default=None, metadata=_sql("TIMESTAMPTZ"))
    # store.spans: none: the segment-log records its items came in (a replay of them is not new)
    log_offsets: tuple[int, ...] | None = field(default=None, metadata=_sql("BIGINT[]"))


_SCALARS = frozenset({str, int, float, bool, bytes, type(None)})


def plain(value: Any) -> Any:
    """Step results may be pydantic models or dataclasses: store them as plain JSON data."""
    kind = type(value)  # exact types first: the common case on the score-writing path
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {k if type(k) is str else str(k): plain(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [plain(v) for v in value]
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (str, int, float, bool, bytes)) or value is None:
        return value
    return repr(value)


def field_names(record_type: type) -> list[str]:
    return [f.name for f in dataclasses.fields(record_type)]


def json_fields(record_type: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(record_type) if f.metadata.get("sql") == "JSON")
