"""The ``phoenix`` sink: scores as Arize Phoenix annotations (REST API ``/v1/*_annotations``).

Run scores are span annotations on the scored agent span; conversation scores are session
annotations on the conversation (Phoenix's ``session.id``), or, when Phoenix has no such session
(the traces carry no ``session.id``), span annotations on the conversation's last agent span.
``name`` is the scorer id and ``identifier`` the score id, so a re-score updates the same
annotation in place (Phoenix upserts on name + span/session + identifier). A scorer error is an
annotation with label ``error`` and the error as explanation; a not-scorable target has label
``not_scorable``. Requests use ``sync=true``, so success means stored.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from tracescorer.export.http_client import JsonClient
from tracescorer.export.sink import ExportResult, ItemResult
from tracescorer.records.deliveries import DueScore

log = logging.getLogger(__name__)

__all__ = ["PhoenixSink", "annotation"]

_SYNC = {"sync": "true"}


def annotation(score: DueScore) -> dict[str, Any]:
    """The annotation body (without ``span_id``/``session_id``)."""
    result: dict[str, Any]
    if score.status == "ok":
        result = {"score": score.score, "label": score.label, "explanation": score.reason}
    elif score.status == "error":
        result = {"score": None, "label": "error", "explanation": score.error or score.error_type or "scorer error"}
    else:
        result = {"score": None, "label": score.status, "explanation": score.reason}
    metadata = {
        "source": "tracescorer",
        "score_id": score.id,
        "status": score.status,
        "run_id": score.run_id,
        "conversation_id": score.conversation_id,
        "error_type": score.error_type if score.status == "error" else None,
        "threshold": score.threshold,
        "judge_model": score.judge_model,
        "judge_cost_usd": score.judge_cost_usd,
        "duration_ms": score.duration_ms,
        "scored_at_unix_nano": score.version * 1000,
    }
    return {
        "name": score.scorer_id,
        "annotator_kind": "LLM" if score.judge_model else "CODE",
        "result": result,
        "metadata": {k: v for k, v in metadata.items() if v is not None},
        "identifier": score.id,
    }


def _span_body(score: DueScore) -> dict[str, Any]:
    return {"span_id": score.span_id, **annotation(score)}


def _session_body(score: DueScore) -> dict[str, Any]:
    return {"session_id": score.conversation_id, **annotation(score)}


class PhoenixSink:
    """Posts annotations to one Phoenix server (``endpoint`` = its base URL, e.g. http://phoenix:6006)."""

    kind = "phoenix"

    def __init__(
        self, endpoint: str, *, api_key: str = "", headers: Mapping[str, str] | None = None, timeout_s: float = 10.0
    ) -> None:
        auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = JsonClient(endpoint, {**auth, **(headers or {})}, timeout_s)

    async def export(self, batch: Sequence[DueScore]) -> Sequence[ItemResult]:
        results: list[ItemResult | None] = [None] * len(batch)
        sessions = [i for i, s in enumerate(batch) if s.entity_type == "conversation" and s.conversation_id]
        spans = [i for i in range(len(batch)) if i not in set(sessions)]
        for path, indices, body in (
            ("/v1/span_annotations", spans, _span_body),
            ("/v1/session_annotations", sessions, _session_body),
        ):
            if indices:
                for i, result in zip(indices, await self._post(path, [batch[i] for i in indices], body), strict=False):
                    results[i] = result
        for i in sessions:
            first = results[i]
            if (
                first is not None
                and first.result is ExportResult.REJECTED
                and (first.error or "").startswith("HTTP 404")
            ):
                # Phoenix knows no such session (its traces carry no session.id): annotate the
                # conversation's last agent span instead
                results[i] = (await self._post("/v1/span_annotations", [batch[i]], _span_body))[0]
        return [r if r is not None else ItemResult(result=ExportResult.RETRY, error="not sent") for r in results]

    async def _post(self, path: str, scores: Sequence[DueScore], body: Any) -> list[ItemResult]:
        reply = await self._client.request("POST", path, {"data": [body(s) for s in scores]}, params=_SYNC)
        result = reply.result()
        if result.result is ExportResult.REJECTED and len(scores) > 1:
            # sync mode refuses the whole request for one unknown span: find out which, one by one
            return [item for s in scores for item in await self._post(path, [s], body)]
        return [result] * len(scores)

    async def force_flush(self, timeout_s: float) -> bool:
        return True

    async def shutdown(self) -> None:
        await self._client.close()
