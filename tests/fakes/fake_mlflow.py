"""A fake MLflow 3 tracking server: the trace assessment REST endpoints MLflow documents.

``POST /api/3.0/mlflow/traces/{trace_id}/assessments`` with ``{"assessment": {...}}`` creates
one (404 ``RESOURCE_DOES_NOT_EXIST`` for an unknown trace; a client-chosen ``assessment_id`` is
kept, and creating one that exists fails with 500 ``INTERNAL_ERROR`` "constraint violation", as
MLflow's SQL store does); ``PATCH .../assessments/{assessment_id}`` with ``{"assessment",
"update_mask"}`` updates the masked fields (metadata merged); ``GET`` reads one and ``GET
/api/3.0/mlflow/traces/{trace_id}`` lists a trace's assessments. Traces exist once the test
registers them (:meth:`add_trace`).
"""

from __future__ import annotations

import itertools
from typing import Any

from aiohttp import web

from fakes.backend_server import BackendServer, Handler

__all__ = ["FakeMlflow"]

_PREFIX = "/api/3.0/mlflow/traces"
_SOURCES = {"HUMAN", "LLM_JUDGE", "CODE"}


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error_code": code, "message": message}, status=status)


class FakeMlflow(BackendServer):
    def __init__(self) -> None:
        super().__init__()
        self.traces: set[str] = set()
        self.assessments: dict[tuple[str, str], dict[str, Any]] = {}
        self._ids = itertools.count(1)

    def add_trace(self, *trace_ids: str) -> None:
        """Register traces by MLflow id (``tr-`` + hex trace id)."""
        with self.lock:
            self.traces.update(trace_ids)

    def routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("POST", _PREFIX + "/{trace_id}/assessments", self._create),
            ("PATCH", _PREFIX + "/{trace_id}/assessments/{assessment_id}", self._update),
            ("GET", _PREFIX + "/{trace_id}/assessments/{assessment_id}", self._get),
            ("GET", _PREFIX + "/{trace_id}", self._trace),
        ]

    async def _create(self, request: web.Request, body: Any) -> web.Response:
        trace_id = request.match_info["trace_id"]
        a = body.get("assessment") if isinstance(body, dict) else None
        if not isinstance(a, dict):
            return _error(400, "INVALID_PARAMETER_VALUE", "Missing value for required parameter 'assessment'.")
        if not a.get("assessment_name") or (a.get("source") or {}).get("source_type") not in _SOURCES:
            return _error(400, "INVALID_PARAMETER_VALUE", f"invalid assessment {a!r}")
        if "feedback" not in a and "expectation" not in a:
            return _error(400, "INVALID_PARAMETER_VALUE", "Unknown assessment type: None")
        with self.lock:
            if trace_id not in self.traces:
                return _error(404, "RESOURCE_DOES_NOT_EXIST", f"Trace with request_id '{trace_id}' not found.")
            aid = a.get("assessment_id") or f"a-{next(self._ids):032x}"
            if (trace_id, aid) in self.assessments:
                return _error(
                    500,
                    "INTERNAL_ERROR",
                    f"Failed to create assessment for trace '{trace_id}' due to a constraint violation.",
                )
            stored = {**a, "assessment_id": aid, "trace_id": trace_id, "valid": True}
            self.assessments[(trace_id, aid)] = stored
        return web.json_response({"assessment": stored})

    async def _update(self, request: web.Request, body: Any) -> web.Response:
        trace_id, aid = request.match_info["trace_id"], request.match_info["assessment_id"]
        if not isinstance(body, dict) or not isinstance(body.get("assessment"), dict) or not body.get("update_mask"):
            return _error(400, "INVALID_PARAMETER_VALUE", "Missing value for required parameter 'update_mask'.")
        fields = [f.strip() for f in str(body["update_mask"]).split(",")]
        new = body["assessment"]
        with self.lock:
            current = self.assessments.get((trace_id, aid))
            if current is None:
                return _error(
                    404, "RESOURCE_DOES_NOT_EXIST", f"Assessment with ID '{aid}' not found for trace '{trace_id}'"
                )
            updated = dict(current)
            for f in fields:
                key = {"assessmentName": "assessment_name"}.get(f, f)
                if key == "metadata":
                    updated["metadata"] = {**current.get("metadata", {}), **new.get("metadata", {})}
                elif key in ("assessment_name", "feedback", "rationale", "expectation", "valid"):
                    updated[key] = new.get(key)
                else:
                    return _error(400, "INVALID_PARAMETER_VALUE", f"cannot update {f!r}")
            self.assessments[(trace_id, aid)] = updated
        return web.json_response({"assessment": updated})

    async def _get(self, request: web.Request, body: Any) -> web.Response:
        with self.lock:
            a = self.assessments.get((request.match_info["trace_id"], request.match_info["assessment_id"]))
        if a is None:
            return _error(404, "RESOURCE_DOES_NOT_EXIST", "assessment not found")
        return web.json_response({"assessment": a})

    async def _trace(self, request: web.Request, body: Any) -> web.Response:
        trace_id = request.match_info["trace_id"]
        with self.lock:
            if trace_id not in self.traces:
                return _error(404, "RESOURCE_DOES_NOT_EXIST", f"Trace {trace_id} not found")
            found = [a for (t, _), a in self.assessments.items() if t == trace_id]
        return web.json_response({"trace": {"trace_info": {"trace_id": trace_id, "assessments": found}}})
