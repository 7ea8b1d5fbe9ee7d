"""The OpenAI Batch API on :class:`~fakes.fake_openai.FakeOpenAI`: ``/v1/files`` (upload, content)
and ``/v1/batches`` (create, retrieve, list, cancel).

A batch is ``in_progress`` until it was retrieved ``results_after_polls`` times (and ``hold`` is
off); then each input line is answered as the server would answer it live (its scripted reply,
recorded in :attr:`FakeOpenAI.requests` with the path ``batch:<batch id>``), and the batch is
``completed`` with an output file (and an error file for error replies).
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from .fake_openai import FakeOpenAI, RecordedRequest, Reply


class FakeBatches:
    """The files and batches of one fake server (thread-safe inspection)."""

    def __init__(self, server: FakeOpenAI) -> None:
        self._server = server
        self._lock = threading.RLock()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.polls: dict[str, int] = {}
        self.results_after_polls = 1
        self.hold = False  # batches stay in progress while set

    @property
    def created(self) -> int:
        with self._lock:
            return len(self.batches)

    @property
    def uploads(self) -> int:
        with self._lock:
            return len(self.files)

    def routes(self, app: web.Application) -> None:
        for prefix in ("/v1", ""):
            app.router.add_post(f"{prefix}/files", self._upload)
            app.router.add_get(f"{prefix}/files/{{id}}/content", self._content)
            app.router.add_post(f"{prefix}/batches", self._create)
            app.router.add_get(f"{prefix}/batches", self._list)
            app.router.add_get(f"{prefix}/batches/{{id}}", self._retrieve)
            app.router.add_post(f"{prefix}/batches/{{id}}/cancel", self._cancel)

    def _file(self, data: bytes, name: str, purpose: str) -> dict[str, Any]:
        with self._lock:
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = data
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
            "status": "processed",
        }

    async def _upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form["file"]
        data = upload.file.read() if hasattr(upload, "file") else str(upload).encode()
        name = getattr(upload, "filename", "input.jsonl")
        return web.json_response(self._file(data, name, str(form.get("purpose", "batch"))))

    async def _content(self, request: web.Request) -> web.Response:
        with self._lock:
            data = self.files.get(request.match_info["id"])
        if data is None:
            return web.json_response({"error": {"message": "no such file"}}, status=404)
        return web.Response(body=data, content_type="application/octet-stream")

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self._lock:
            if body.get("input_file_id") not in self.files:
                return web.json_response({"error": {"message": "no such file"}}, status=400)
            batch_id = f"batch_{len(self.batches) + 1}"
            batch = {
                "id": batch_id,
                "object": "batch",
                "endpoint": body.get("endpoint"),
                "input_file_id": body["input_file_id"],
                "completion_window": body.get("completion_window", "24h"),
                "status": "in_progress",
                "created_at": int(time.time()),
                "output_file_id": None,
                "error_file_id": None,
                "metadata": body.get("metadata"),
                "request_counts": {"total": 0, "completed": 0, "failed": 0},
            }
            self.batches[batch_id] = batch
            self.polls[batch_id] = 0
        return web.json_response(batch)

    async def _list(self, request: web.Request) -> web.Response:
        with self._lock:
            data = [dict(b) for b in reversed(self.batches.values())]
        return web.json_response({"object": "list", "data": data, "has_more": False})

    async def _retrieve(self, request: web.Request) -> web.Response:
        batch_id = request.match_info["id"]
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return web.json_response({"error": {"message": "no such batch"}}, status=404)
            self.polls[batch_id] += 1
            due = (
                batch["status"] == "in_progress" and not self.hold and self.polls[batch_id] >= self.results_after_polls
            )
        if due:
            self._answer(batch)
        with self._lock:
            return web.json_response(dict(batch))

    async def _cancel(self, request: web.Request) -> web.Response:
        with self._lock:
            batch = self.batches.get(request.match_info["id"])
            if batch is None:
                return web.json_response({"error": {"message": "no such batch"}}, status=404)
            if batch["status"] == "in_progress":
                batch["status"] = "cancelled"
            return web.json_response(dict(batch))

    def _answer(self, batch: dict[str, Any]) -> None:
        from .fake_openai import RecordedRequest

        server = self._server
        outputs: list[str] = []
        errors: list[str] = []
        for raw in self.files[batch["input_file_id"]].decode().splitlines():
            line = json.loads(raw)
            recorded = RecordedRequest(
                path=f"batch:{batch['id']}", headers={}, body=line["body"], received_at=time.monotonic()
            )
            reply = server._pick(recorded)
            result = _result(server, recorded, reply, line["custom_id"])
            (errors if result["error"] or result["response"]["status_code"] != 200 else outputs).append(
                json.dumps(result)
            )
        with self._lock:
            batch["request_counts"] = {
                "total": len(outputs) + len(errors),
                "completed": len(outputs),
                "failed": len(errors),
            }
            if outputs:
                batch["output_file_id"] = self._file(
                    ("\n".join(outputs) + "\n").encode(), "output.jsonl", "batch_output"
                )["id"]
            if errors:
                batch["error_file_id"] = self._file(
                    ("\n".join(errors) + "\n").encode(), "errors.jsonl", "batch_output"
                )["id"]
            batch["status"] = "completed"


def _result(server: FakeOpenAI, recorded: RecordedRequest, reply: Reply, custom_id: str) -> dict[str, Any]:
    if reply.kind == "error":
        response = {"status_code": reply.status, "request_id": custom_id, "body": {"error": reply.value}}
    elif reply.kind in ("json", "text"):
        response = {"status_code": 200, "request_id": custom_id, "body": server._completion(recorded, reply)}
    else:  # disconnect, hang, malformed: a batch answers them as a server error
        response = {"status_code": 500, "request_id": custom_id, "body": {"error": {"message": reply.kind}}}
    return {"id": f"batch_req_{custom_id}", "custom_id": custom_id, "response": response, "error": None}
