"""What an exported score says, in OpenTelemetry terms: ids, attributes, resource, time.

Shared by the OTLP span and log sinks. Attribute values are plain Python (str, bool, int,
float); :func:`key_values` turns them into OTLP ``KeyValue`` messages.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue

from tracescorer.records.deliveries import DueScore

__all__ = [
    "EVALUATION_EVENT",
    "SCOPE",
    "default_service_name",
    "digest_id",
    "evaluation_attributes",
    "evaluation_span_id",
    "hex_id",
    "key_values",
    "resource_attributes",
    "scored_time_unix_nano",
]

EVALUATION_EVENT = "gen_ai.evaluation.result"
SCOPE_NAME = "tracescorer.export"
SCOPE = InstrumentationScope(name=SCOPE_NAME)
DEFAULT_SERVICE_NAME = "tracescorer"
_MAX_TEXT = 4096


def hex_id(value: str | None, digits: int) -> bytes | None:
    """A valid (non-zero) OTLP id from its hex form, None when malformed."""
    if not value or len(value) != digits:
        return None
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        return None
    return raw if any(raw) else None


def digest_id(text: str, nbytes: int) -> bytes:
    raw = hashlib.sha256(text.encode()).digest()[:nbytes]
    return raw if any(raw) else b"\x01".rjust(nbytes, b"\0")  # the all-zero id is invalid in OTLP


def evaluation_span_id(score: DueScore) -> bytes:
    """Deterministic per score version: a retried export sends the same span, a re-score a new one."""
    return digest_id(f"tracescorer.evaluation\0{score.id}\0{score.version}", 8)


def scored_time_unix_nano(score: DueScore) -> int:
    """The scored agent span's end (the evaluation's place in the trace); the scoring time when
    the run is not known."""
    if score.scored_end_unix_nano:
        return int(score.scored_end_unix_nano)
    return score.version * 1000


def evaluation_attributes(score: DueScore) -> dict[str, Any]:
    """The ``gen_ai.evaluation.*`` attributes (semconv ``gen_ai.evaluation.result``) and ours."""
    attrs: dict[str, Any] = {"gen_ai.evaluation.name": score.scorer_id}
    if score.score is not None and math.isfinite(score.score):
        attrs["gen_ai.evaluation.score.value"] = float(score.score)
    if score.label is not None:
        attrs["gen_ai.evaluation.score.label"] = score.label
    if score.reason:
        attrs["gen_ai.evaluation.explanation"] = score.reason[:_MAX_TEXT]
    if score.conversation_id:
        attrs["gen_ai.conversation.id"] = score.conversation_id
    if score.status == "error":
        attrs["error.type"] = score.error_type or "scorer_error"
        if score.error:
            attrs["tracescorer.score.error"] = score.error[:_MAX_TEXT]
    attrs["tracescorer.scorer.id"] = score.scorer_id
    if score.scorer_version:
        attrs["tracescorer.scorer.version"] = score.scorer_version
    if score.run_id:
        attrs["tracescorer.run.id"] = score.run_id
    if score.judge_model:
        attrs["tracescorer.judge.model"] = score.judge_model
    if score.judge_cost_usd is not None:
        attrs["tracescorer.judge.cost_usd"] = float(score.judge_cost_usd)
    attrs["tracescorer.score.id"] = score.id
    attrs["tracescorer.score.status"] = score.status
    attrs["tracescorer.score.time_unix_nano"] = score.version * 1000
    if score.duration_ms is not None and math.isfinite(score.duration_ms):
        attrs["tracescorer.score.duration_ms"] = float(score.duration_ms)
    return attrs


def default_service_name() -> str:
    """``OTEL_SERVICE_NAME``, else ``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES``, else tracescorer."""
    name = os.environ.get("OTEL_SERVICE_NAME", "").strip()
    if name:
        return name
    for item in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        key, _, value = item.partition("=")
        if key.strip() == "service.name" and value.strip():
            return value.strip()
    return DEFAULT_SERVICE_NAME


def resource_attributes(score: DueScore) -> dict[str, Any]:
    """The resource an evaluation is sent with: the *scored* service's name only.

    Backends that merge resources into the trace (MLflow's trace tags, last writer wins) then
    keep the agent's ``service.name``; nothing else of ours is put there.
    """
    return {"service.name": score.service_name or default_service_name()}


def _any_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue(string_value=str(value))


def key_values(attrs: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> list[KeyValue]:
    items = attrs.items() if isinstance(attrs, Mapping) else attrs
    return [KeyValue(key=k, value=_any_value(v)) for k, v in items]
