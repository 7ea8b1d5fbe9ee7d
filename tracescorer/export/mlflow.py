"""The ``mlflow`` sink: scores as MLflow 3 trace assessments (feedback), REST API ``/api/3.0``.

Run scores are feedback on the scored agent span (``tr-{trace_id}`` / ``span_id``). Conversation
scores go, as MLflow's own multi-turn scorers do, on the conversation's **first** trace with
metadata ``mlflow.trace.session = <conversation id>``. A scorer error is ``feedback.error``
(``error_code`` = the error type), never a failed trace. The ``assessment_id`` is derived from
the score id (``a-`` + 32 hex digits): the first delivery creates it (``POST``), a re-score
updates it in place (``PATCH`` with an update mask). MLflow refuses a second create of the same
id, so a create that finds it there turns into an update and an update that finds nothing into a
create.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from tracescorer.export.http_client import JsonClient, Reply
from tracescorer.export.sink import ItemResult
from tracescorer.records.deliveries import DueScore

log = logging.getLogger(__name__)

__all__ = ["MlflowSink", "assessment", "assessment_id", "target_of"]

_PREFIX = "/api/3.0/mlflow/traces"
_UPDATE_MASK = "assessment_name,feedback,rationale,metadata"
SESSION_KEY = "mlflow.trace.session"


def assessment_id(score_id: str) -> str:
    """Stable per score: ``a-`` + 32 hex digits (the form MLflow generates)."""
    return "a-" + hashlib.sha256(f"tracescorer.assessment\0{score_id}".encode()).hexdigest()[:32]


def target_of(score: DueScore) -> tuple[str, str | None]:
    """(MLflow trace id, span id or None) the assessment belongs to."""
    if score.entity_type == "conversation" and score.conversation_id:
        return f"tr-{score.first_trace_id or score.trace_id}", None
    return f"tr-{score.trace_id}", score.span_id


def assessment(score: DueScore) -> dict[str, Any]:
    """The ``Assessment`` message (MLflow's proto JSON) for one score version."""
    trace_id, span_id = target_of(score)
    body: dict[str, Any] = {
        "assessment_id": assessment_id(score.id),
        "assessment_name": score.scorer_id,
        "trace_id": trace_id,
    }
    if span_id:
        body["span_id"] = span_id
    body["source"] = (
        {"source_type": "LLM_JUDGE", "source_id": score.judge_model}
        if score.judge_model
        else {"source_type": "CODE", "source_id": score.scorer_id}
    )
    if score.status == "error":
        body["feedback"] = {
            "error": {"error_code": score.error_type or "scorer_error", "error_message": score.error or "scorer error"}
        }
    else:
        body["feedback"] = {"value": score.score if score.status == "ok" else None}
    body["rationale"] = score.reason or ""
    metadata = {
        "tracescorer.score_id": score.id,
        "tracescorer.status": score.status,
        "tracescorer.run_id": score.run_id,
        "tracescorer.label": score.label,
        "tracescorer.threshold": None if score.threshold is None else f"{score.threshold:g}",
    }
    if score.entity_type == "conversation" and score.conversation_id:
        metadata[SESSION_KEY] = score.conversation_id
    body["metadata"] = {k: str(v) for k, v in metadata.items() if v is not None}
    return body


def _already_exists(reply: Reply) -> bool:
    # MLflow answers a duplicate assessment_id with INTERNAL_ERROR "... constraint violation"
    # (SQL stores) or RESOURCE_ALREADY_EXISTS
    return reply.status in (400, 409, 500) and ("constraint" in reply.body or "ALREADY_EXISTS" in reply.body)


class MlflowSink:
    """Logs feedback to one MLflow tracking server (``tracking_uri`` = its base URL)."""

    kind = "mlflow"

    def __init__(
        self,
        tracking_uri: str,
        *,
        experiment_id: str | None = None,
        token: str = "",
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        extra: dict[str, str] = {}
        if token:
            extra["Authorization"] = f"Bearer {token}"
        if experiment_id:
            extra["x-mlflow-experiment-id"] = experiment_id
        self._client = JsonClient(tracking_uri, {**extra, **(headers or {})}, timeout_s)

    async def export(self, batch: Sequence[DueScore]) -> Sequence[ItemResult]:
        return [await self._deliver(score) for score in batch]

    async def _deliver(self, score: DueScore) -> ItemResult:
        body = assessment(score)
        if score.delivered_version is not None:
            reply = await self._update(body)
            if reply.status == 404:  # deleted in MLflow meanwhile: create it again
                reply = await self._create(body)
        else:
            reply = await self._create(body)
            if _already_exists(reply):  # created by an attempt whose answer was lost
                reply = await self._update(body)
        return reply.result()

    async def _create(self, body: dict[str, Any]) -> Reply:
        return await self._client.request("POST", f"{_PREFIX}/{body['trace_id']}/assessments", {"assessment": body})

    async def _update(self, body: dict[str, Any]) -> Reply:
        fields = {
            k: body[k] for k in ("assessment_id", "trace_id", "assessment_name", "feedback", "rationale", "metadata")
        }
        return await self._client.request(
            "PATCH",
            f"{_PREFIX}/{body['trace_id']}/assessments/{body['assessment_id']}",
            {"assessment": fields, "update_mask": _UPDATE_MASK},
        )

    async def force_flush(self, timeout_s: float) -> bool:
        return True

    async def shutdown(self) -> None:
        await self._client.close()
