"""`tracescorer report` end to end: real daemon and OTLP traffic (code scorers and an LLM judge on
the fake OpenAI server), the report written while the daemon runs (query endpoint) and after it
stopped (read-only file), each rendered in headless Chromium over the DevTools protocol: it
loads with no console error, shows every scorer, and hostile agent/judge text stays text; the
failures, the errors and "no failures" are shown apart, transcripts open with the tool calls and
an "(empty answer)" marker, trace ids link to the configured trace backend, and a backfill leaves
the trend where it was."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fakes.fake_openai import FakeOpenAI, Reply
from support.daemon import DaemonProcess, config_dict, wait_for

from tracescorer.demo import emit_conversations

HOSTILE_ANSWER = (
    'Done </td></table><script>console.error("xss-answer")</script>'
    '<img src=x onerror="console.error(\'xss-img\')"><a href="https://evil.example/">x</a>'
)
HOSTILE_REASON = '<script>console.error("xss-reason")</script> the agent ignored the question'
CONVERSATIONS = [
    {
        "id": "conv-good",
        "agent": "support-alpha",
        "turns": [
            (
                "Where is my order 7?",
                "track_order",
                {"order": 7},
                "in transit",
                "Order 7 is in transit, arriving Friday.",
            ),
            ("Thanks!", None, None, None, "You're welcome."),
        ],
    },
    {
        "id": "conv-<b>hostile</b>",
        "agent": "support-<i>beta</i>",
        "turns": [
            (
                "<script>console.error('xss-user')</script> refund please",
                "issue_refund",
                {"order": 7},
                "<b>refund</b> issued",
                HOSTILE_ANSWER,
            )
        ],
    },
    {"id": "conv-empty", "agent": "support-alpha", "turns": [("Hello?", None, None, None, "")]},
    {"id": "conv-broken", "agent": "support-gamma", "turns": [("Status?", None, None, None, "All fine, MARK-ERR.")]},
]
TRACE_URL = "https://jaeger.example/trace/{trace_id}"
BINDINGS = [
    {"id": "non-empty", "prebuilt": "non_empty_response", "scope": "run", "threshold": 1},
    {"id": "mentions-order", "prebuilt": "includes", "options": {"text": "order"}, "scope": "run", "threshold": 1},
    {
        "id": "answered-judge",
        "prebuilt": "multi_turn_judge",
        "scope": "conversation",
        "threshold": 1,
        "options": {"criterion": "The agent answered every question"},
    },
    {"id": "never-matches", "prebuilt": "non_empty_response", "scope": "run", "filter": {"agent_name": "nobody-*"}},
    {
        "id": "never-fails",
        "prebuilt": "non_empty_response",
        "scope": "run",
        "threshold": 1,
        "filter": {"agent_name": "support-gamma"},
    },
]
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _chromium() -> str:
    """Debian's chromium; installed with apt-get when absent (the test set-up, as root)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.geteuid() != 0:
        pytest.fail("chromium is not installed and installing it needs root: apt-get install chromium")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
    result = subprocess.run(install, capture_output=True, text=True, env=env, timeout=900)
    if result.returncode != 0:  # a fresh machine: the package lists first
        subprocess.run(["apt-get", "update"], capture_output=True, text=True, env=env, timeout=600)
        result = subprocess.run(install, capture_output=True, text=True, env=env, timeout=900)
    found = shutil.which("chromium")
    if result.returncode != 0 or not found:
        pytest.fail(f"apt-get install chromium failed ({result.returncode}): {result.stderr[-2000:]}")
    return found


class Page:
    """One page of a headless Chromium, driven over the DevTools protocol (WebSocket)."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self._next = 0
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self._waiting:
                self._waiting.pop(data["id"]).set_result(data)
            elif "method" in data:
                self.events.append(data)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[self._next] = future
        await self.ws.send_json({"id": self._next, "method": method, "params": params})
        reply = await asyncio.wait_for(future, 30)
        assert "error" not in reply, f"{method}: {reply['error']}"
        result: dict[str, Any] = reply.get("result", {})
        return result

    async def until(self, method: str, timeout_s: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for event in self.events:
                if event["method"] == method:
                    return event
            await asyncio.sleep(0.05)
        raise TimeoutError(f"no {method} within {timeout_s}s")

    def errors(self) -> list[str]:
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif e["method"] == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:500])
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                out.append("log: " + p["entry"].get("text", ""))
        return out

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    async def close(self) -> None:
        self._reader.cancel()
        await self.ws.close()


class Chromium:
    """A headless Chromium, driven over the DevTools protocol: :meth:`render` opens a report in a
    tab of its own and returns what the page showed and logged."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Chromium:
        profile = self.tmp / f"chromium-profile-{time.monotonic_ns()}"
        self.proc = subprocess.Popen(
            [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            port_file = profile / "DevToolsActivePort"
            deadline = time.monotonic() + 60
            while not (port_file.exists() and port_file.read_text().strip()):
                assert self.proc.poll() is None, f"chromium exited with {self.proc.returncode}"
                assert time.monotonic() < deadline, "chromium did not open its DevTools port"
                await asyncio.sleep(0.1)
            self.base = f"http://127.0.0.1:{int(port_file.read_text().split()[0])}"
            self.session = aiohttp.ClientSession()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.session is not None:
            await self.session.close()
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    async def render(self, html: Path) -> dict[str, Any]:
        assert self.session is not None
        async with self.session.put(f"{self.base}/json/new?about:blank") as resp:
            target = await resp.json(content_type=None)
        try:
            async with self.session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                page = Page(ws)
                for domain in ("Runtime", "Log", "Page", "Network"):
                    await page.send(f"{domain}.enable")
                await page.send("Page.navigate", url=html.resolve().as_uri())
                await page.until("Page.loadEventFired")
                script = (
                    "JSON.stringify({title: document.title, text: document.body.textContent, "
                    "scorers: [...document.querySelectorAll('section.scorer')].map(s => s.dataset.scorer), "
                    "scripts: document.scripts.length, images: document.images.length, "
                    "links: [...document.links].map(a => a.href), svgs: document.querySelectorAll('svg').length})"
                )
                result = await page.send("Runtime.evaluate", expression=script, returnByValue=True)
                shot = await page.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
                (self.tmp / (html.stem + ".png")).write_bytes(__import__("base64").b64decode(shot["data"]))
                await asyncio.sleep(0.2)  # late console messages of the load
                dom = json.loads(result["result"]["value"])
                dom["errors"], dom["requests"] = page.errors(), page.requests()
                await page.close()
                return dom
        finally:
            async with self.session.get(f"{self.base}/json/close/{target['id']}") as resp:
                await resp.read()


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        server.script("Criterion:", Reply.json({"satisfied": True, "reasoning": "every question answered"}))
        server.script("xss-answer", Reply.json({"satisfied": False, "reasoning": HOSTILE_REASON}))  # newer rules win
        server.script("MARK-ERR", Reply.error(400, "the judge refused this one"))
        yield server


def _trend(html: str, scorer_id: str) -> str:
    """The trend chart of one scorer's section."""
    section = html[html.index(f'data-scorer="{scorer_id}"') :]
    return section[section.index('<svg class="chart trend"') : section.index("</svg>") + 6]


def _check(dom: dict[str, Any], html: Path) -> None:
    assert dom["errors"] == [], dom["errors"]
    assert dom["requests"] == [html.resolve().as_uri()], "the report loaded something besides itself"
    assert sorted(dom["scorers"]) == sorted(b["id"] for b in BINDINGS)
    assert dom["scripts"] == 0 and dom["images"] == 0
    inside = [link for link in dom["links"] if link.startswith(html.resolve().as_uri() + "#")]
    traces = [link for link in dom["links"] if link not in inside]
    assert traces and all(re.fullmatch(r"https://jaeger\.example/trace/[0-9a-f]{32}", link) for link in traces), traces
    assert dom["svgs"] >= 8  # trend + distribution for each scorer with scores
    text = dom["text"]
    assert "issue_refund" in text and '{"order": 7} → <b>refund</b> issued' in text  # the tool call, open
    assert "(empty answer)" in text
    assert "No failures: all 1 labelled score passed." in text  # never-fails, no "worst" passes listed
    assert "Errors: the 1 latest of 1" in text and "could not be scored" in text and "the judge refused" in text
    assert "Criterion: The agent answered every question" in text  # said once, not in each reason
    assert f"Not satisfied: {HOSTILE_REASON}" in text  # the judge's reason without the criterion
    for label in ("mean score", "pass rate", "scores per", "threshold 1", "time of the run's end"):
        assert label in text, label
    for hostile in (
        '<script>console.error("xss-answer")</script>',
        HOSTILE_REASON,
        "conv-<b>hostile</b>",
        "support-<i>beta</i>",
        "<script>console.error('xss-user')</script> refund please",
    ):
        assert hostile in text, f"{hostile!r} not shown as text"
    assert "No scores in this window." in text  # never-matches
    assert "every question answered" not in text  # a pass is no failure: conv-good's verdict is not listed


async def test_report_renders_in_chromium_with_the_daemon_running_and_stopped(tmp_path, fake):
    _chromium()
    judge = {"model": "openai/gpt-4o-mini", "api_base": fake.base_url, "api_key": "test-key", "timeout_s": 10}
    cfg = config_dict(
        tmp_path,
        assembly={"idle_s": 0.1, "conversation_idle_s": 0.3},
        judge=judge,
        scorers=BINDINGS,
        report={"trace_url": TRACE_URL},
        # the stages in the daemon's own process: worker processes (each importing the judge's
        # client at start) would triple its start; tests/e2e/test_workers*.py run them
        workers={"count": 0},
    )
    daemon = DaemonProcess(tmp_path, cfg).start()
    running, stopped, backfilled = tmp_path / "running.html", tmp_path / "stopped.html", tmp_path / "backfilled.html"
    async with Chromium(tmp_path) as chromium:
        try:
            await asyncio.to_thread(emit_conversations, daemon.grpc_endpoint, CONVERSATIONS)
            # 5 runs x 2 code scorers + 1 never-fails + 4 judged conversations
            await asyncio.to_thread(
                wait_for, lambda: len(daemon.query_json("SELECT id FROM scores")) >= 15, 60, 0.25, "15 scores"
            )
            out = await asyncio.to_thread(daemon.cli, "report", "--since", "1h", "--output", str(running))
            assert "5 scorer(s), 15 score(s)" in out.stdout
            last = dt.datetime.fromisoformat(daemon.query_json("SELECT max(updated_at) AS t FROM scores")[0]["t"])
            # the report while the daemon runs, in the browser (meanwhile the clock moves on)
            _check(await chromium.render(running), running)
            # re-scoring every conversation later rewrites the score rows, not the history
            later = last + dt.timedelta(seconds=2)  # past the trend's buckets (seconds: the data span a few)
            await asyncio.to_thread(wait_for, lambda: dt.datetime.now(dt.UTC) > later, 10, 0.1, "two seconds on")
            await asyncio.to_thread(daemon.cli, "backfill", "--scorer", "answered-judge")
            out = await asyncio.to_thread(daemon.cli, "report", "--since", "1h", "--output", str(backfilled))
            assert "5 scorer(s), 15 score(s)" in out.stdout
        finally:
            assert daemon.stop() == 0, daemon.log()
        out = await asyncio.to_thread(daemon.cli, "report", "--output", str(stopped))
        assert "5 scorer(s), 15 score(s)" in out.stdout
        _check(await chromium.render(stopped), stopped)
    before, after = _trend(running.read_text(), "answered-judge"), _trend(backfilled.read_text(), "answered-judge")
    assert before == after and "<circle" in before
    assert "from backfill" in backfilled.read_text() and "from backfill" not in running.read_text()

    html = running.read_text()
    assert "<script" not in html and "<img" not in html and "url(" not in html
    assert not re.search(r"""src\s*=\s*["']?(https?:|//)""", html)
    external = re.findall(r"""href\s*=\s*["']?((?:https?:)?//[^"'>\s]*)""", html)
    assert external and all(link.startswith("https://jaeger.example/trace/") for link in external), external
    assert "Content-Security-Policy" in html
    assert "daemon at http://127.0.0.1" in running.read_text() and "database " in stopped.read_text()

    one = tmp_path / "one.html"
    out = await asyncio.to_thread(daemon.cli, "report", "--scorer", "answered-judge", "--output", str(one))
    assert "1 scorer(s), 4 score(s)" in out.stdout
    assert one.read_text().count('<section class="scorer"') == 1
