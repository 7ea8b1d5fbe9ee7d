"""A rule-based stand-in for an LLM judge, used by ``tracescorer demo`` when no model is set.

It speaks the OpenAI chat-completions API on 127.0.0.1 so the demo runs the real judge path
(litellm, structured output, retries) without an API key. It is NOT an LLM: it reads the fenced
transcript in the prompt and answers "not satisfied" when the assistant apologised, reported a
failure or only asked questions back; every verdict says so.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_FENCED = re.compile(r"<<<BEGIN_UNTRUSTED_[A-Z0-9_]+>>>(.*?)<<<END_UNTRUSTED_[A-Z0-9_]+>>>", re.S)
_FAILURE = re.compile(r"\b(sorry|failed|failure|error|unable|cannot|can't|could not|try again later)\b", re.I)
NOTICE = "[rule-based stand-in judge, not an LLM]"


def verdict(prompt: str) -> tuple[bool, str]:
    """The stand-in's rule: satisfied unless the fenced assistant text shows failure or evasion."""
    fenced = " ".join(_FENCED.findall(prompt)) or prompt
    turns = [t.strip() for t in re.split(r"\[\d+\] Assistant:", fenced) if t.strip()]
    failure = _FAILURE.search(fenced)
    if failure:
        return False, f"{NOTICE} the assistant reported a problem ({failure.group(0)!r})."
    if turns and all(t.rstrip().endswith("?") for t in turns[-1:]):
        return False, f"{NOTICE} the assistant ended by asking a question instead of resolving the request."
    return True, f"{NOTICE} the assistant answered without apologising or reporting a failure."


def _fill(schema: dict[str, Any], ok: bool, text: str) -> Any:
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return {name: _fill(sub, ok, text) for name, sub in schema.get("properties", {}).items()}
    if kind == "boolean":
        return ok
    if kind in ("number", "integer"):
        return 1 if ok else 0
    if kind == "array":
        return []
    if "enum" in schema:
        return schema["enum"][0]
    return text


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # http.server's name
        pass

    def do_POST(self) -> None:  # http.server's name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        ok, explanation = verdict(prompt)
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema") if isinstance(fmt, dict) else None
        content = json.dumps(_fill(schema, ok, explanation)) if schema else explanation
        reply = {
            "id": f"chatcmpl-standin-{time.time_ns()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "stand-in"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {
                "prompt_tokens": len(prompt) // 4,
                "completion_tokens": len(content) // 4,
                "total_tokens": (len(prompt) + len(content)) // 4,
            },
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class StandInJudge:
    """The stand-in server on a free loopback port, in a background thread."""

    def __init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="stand-in-judge", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> StandInJudge:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
