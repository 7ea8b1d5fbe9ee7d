"""Score and decision rows for DuckDB (plain data + SQL; executed by the store's writer)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tracescorer.store.jsonvalue import dumps
from tracescorer.store.schema import DECISION_COLUMNS, SCORE_COLUMNS
from tracescorer.store.upsert import upsert

_SCORE_DATA = [n for n, _ in SCORE_COLUMNS if n not in ("created_at", "updated_at", "exported_at")]
_DECISION_DATA = [n for n, _ in DECISION_COLUMNS if n != "decided_at"]

@dataclass(frozen=True, slots=True, kw_only=True)
class ScoreRecord:
    """One row of ``scores`` (see schema.SCORE_COLUMNS for the meaning of each field)."""

    id: str
    scorer_id: str
    scorer_name: str
    run_id: str | None
    trace_id: str | None
    span_id: str | None
    conversation_id: str | None
    entity_type: str
    entity_id: str | None
    source: str
    score: float | None
    reason: str | None
    status: str
    error: str | None = None
    error_type: str | None = None
    label: str | None = None
    threshold: float | None = None
    preprocess_step_result: Any = None
    analyze_step_result: Any = None
    preprocess_prompt: str | None = None
    analyze_prompt: str | None = None
    generate_score_prompt: str | None = None
    generate_reason_prompt: str | None = None
    judge_model: str | None = None
    judge_input_tokens: int | None = None
    judge_output_tokens: int | None = None
    judge_cost_usd: float | None = None
    judge_attempts: int | None = None
    duration_ms: float | None = None
    sample_rate: float | None = None
    metadata: dict[str, Any] | None = None

    def params(self) -> list[Any]:
        values = []
        for name in _SCORE_DATA:
            value = getattr(self, name)
            if name in ("preprocess_step_result", "analyze_step_result", "metadata"):
                value = None if value is None else dumps(_plain(value))
            values.append(value)
        return values


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionRecord:
    """One row of ``scoring_decisions``: the latest decision for a (scorer, target) pair."""

    id: str
    scorer_id: str
    target_type: str
    target_id: str
    trace_id: str | None
    conversation_id: str | None
    decision: str
    detail: str | None
    sample_rate: float | None
    source: str
    score_id: str | None = None

    def params(self) -> list[Any]:
        return [getattr(self, name) for name in _DECISION_DATA]


def _plain(value: Any) -> Any:
    """Step results may be pydantic models or dataclasses: store them as plain JSON data."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool, bytes)) or value is None:
        return value
    return repr(value)


def write_job(scores: Sequence[ScoreRecord], decisions: Sequence[DecisionRecord]) -> Any:
    """A store job upserting the given rows in multi-row statements (last one wins per id)."""
    score_rows = [s.params() for s in scores]
    decision_rows = [d.params() for d in decisions]

    def run(con: Any) -> None:
        upsert(con, "scores", _SCORE_DATA, "id", score_rows,
               insert_extra={"created_at": "now()", "updated_at": "now()", "exported_at": "NULL"},
               update_extra=", updated_at = now(), exported_at = NULL")
        upsert(con, "scoring_decisions", _DECISION_DATA, "id", decision_rows,
               insert_extra={"decided_at": "now()"}, update_extra=", decided_at = now()")

    return run
