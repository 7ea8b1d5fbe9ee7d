"""The fake OpenAI server itself (it is reused by end-to-end tests)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.fakes import FakeOpenAI, Reply, fake_openai


def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def chat(content: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}], **extra}


def test_scripting_paths_and_counts(fake: FakeOpenAI) -> None:
    fake.script("alpha", [Reply.rate_limited(retry_after_s=2, retry_after_ms=1500), Reply.json({"ok": 1})])
    fake.script(lambda r: r.body.get("model") == "special", Reply.text("special reply"))
    status, headers, body = post(f"{fake.base_url}/chat/completions", chat("alpha one"))
    assert status == 429 and headers["Retry-After"] == "2" and headers["retry-after-ms"] == "1500"
    assert json.loads(body)["error"]["code"] == "rate_limit_exceeded"
    base = fake.base_url.removesuffix("/v1")
    status, _, body = post(
        f"{base}/chat/completions",  # no /v1 prefix
        chat("alpha one", response_format={"type": "json_object"}),
    )
    data = json.loads(body)
    assert status == 200 and json.loads(data["choices"][0]["message"]["content"]) == {"ok": 1}
    assert data["usage"]["total_tokens"] == data["usage"]["prompt_tokens"] + data["usage"]["completion_tokens"]
    _, _, body = post(f"{fake.base_url}/chat/completions", {**chat("x"), "model": "special"})
    assert json.loads(body)["choices"][0]["message"]["content"] == "special reply"
    rf = {"type": "json_object"}
    _, _, body = post(f"{fake.base_url}/chat/completions", chat("unmatched", response_format=rf))
    assert json.loads(json.loads(body)["choices"][0]["message"]["content"]) == {"score": 1}
    _, _, body = post(f"{fake.base_url}/chat/completions", chat("unmatched"))  # no format: text
    assert "```json" in json.loads(body)["choices"][0]["message"]["content"]
    assert fake.attempts() == 5 and fake.attempts("alpha") == 2
    assert sorted(fake.attempts_by_request().values()) == [1, 2, 2]
    assert [r.path for r in fake.requests[:2]] == ["/v1/chat/completions", "/chat/completions"]
    fake.wait_for_requests(5, timeout_s=1)
    with pytest.raises(TimeoutError):
        fake.wait_for_requests(6, timeout_s=0.05)


def test_error_shapes(fake: FakeOpenAI) -> None:
    fake.script("ctx", Reply.context_length())
    fake.script("auth", Reply.unauthorized())
    fake.script("down", Reply.server_error(503))
    fake.script("bad", Reply.malformed())
    assert post(f"{fake.base_url}/chat/completions", chat("ctx"))[0] == 400
    error = json.loads(post(f"{fake.base_url}/chat/completions", chat("ctx"))[2])["error"]
    assert error["code"] == "context_length_exceeded" and error["type"] == "invalid_request_error"
    assert post(f"{fake.base_url}/chat/completions", chat("auth"))[0] == 401
    assert post(f"{fake.base_url}/chat/completions", chat("down"))[0] == 503
    status, _, body = post(f"{fake.base_url}/chat/completions", chat("bad"))
    assert status == 200
    with pytest.raises(ValueError):
        json.loads(body)


def test_disconnect_and_independent_instances() -> None:
    with fake_openai() as a, fake_openai() as b:
        assert a.base_url != b.base_url
        a.script("drop", Reply.disconnect())
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            post(f"{a.base_url}/chat/completions", chat("drop"))
        assert a.attempts() == 1 and b.attempts() == 0
    a.stop()  # idempotent
