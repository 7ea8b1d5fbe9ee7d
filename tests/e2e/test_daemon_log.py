"""The daemon's log as an operator reads it (a real daemon process, its stderr parsed line by line):
JSON lines when asked, the version and the bound addresses at start, LiteLLM neither doubled nor
per call, no warm-up request, and a judge outage logged once with its count, then its recovery."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from fakes.fake_openai import FakeOpenAI, Reply
from support.daemon import DaemonProcess, config_dict, wait_for
from support.otlp import agent_trace, span_exporter, tracer

import tracescorer


def _json_lines(text: str) -> list[dict[str, Any]]:
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)  # every line of the log is one JSON object
        except ValueError:
            raise AssertionError(f"not a JSON line: {line!r}") from None
        assert {"time", "level", "logger", "message"} <= set(record), line
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", record["time"]), record["time"]
        records.append(record)
    return records


def _scores(daemon: DaemonProcess, status: str) -> int:
    rows = daemon.query_json(f"SELECT count(*) AS n FROM scores WHERE scorer_id = 'judge' AND status = '{status}'")
    return int(rows[0]["n"])


def test_json_log_of_a_judge_outage_and_its_recovery(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script("Criterion:", Reply.json({"satisfied": True, "reasoning": "answered"}))
        fake.script("outage-500", Reply.server_error(500))  # newer rules win
        fake.script("outage-429", Reply.rate_limited(retry_after_s=0))
        fake.script("outage-401", Reply.unauthorized())
        cfg = config_dict(
            tmp_path,
            # one worker process: its lines reach the daemon's log in the daemon's format; each
            # worker tells of an outage it sees (one worker: the outage's lines once)
            workers={"count": 1},
            assembly={"idle_s": 0.2},
            log={"level": "info", "format": "json"},  # lower case is accepted
            judge={"model": "openai/gpt-4o-mini", "api_base": fake.base_url, "api_key": "k"},
            scorers=[
                {
                    "id": "judge",
                    "prebuilt": "multi_turn_judge",
                    "scope": "run",
                    "options": {"criterion": "answered"},
                    "judge": {"retries": 0},
                }
            ],
        )
        daemon = DaemonProcess(tmp_path, cfg).start()
        try:
            with tracer(span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint)) as t:
                for answer in ("outage-500", "outage-429", "outage-401", "outage-500 again"):
                    agent_trace(t, answer=answer)
            wait_for(lambda: _scores(daemon, "error") == 4, 60, interval_s=0.1, what="4 error rows")
            with tracer(span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint)) as t:
                agent_trace(t, answer="fine")
                agent_trace(t, answer="fine again")
            wait_for(lambda: _scores(daemon, "ok") == 2, 60, interval_s=0.1, what="2 ok rows")
        finally:
            assert daemon.stop() == 0, daemon.log()
    records = _json_lines(daemon.log())
    messages = [r["message"] for r in records]

    serving = next(m for m in messages if " serving " in m)
    assert serving.startswith(f"tracescorer {tracescorer.__version__} serving (pid ")
    assert daemon.info is not None
    assert f"OTLP gRPC 127.0.0.1:{daemon.info.grpc_port}" in serving
    assert f"OTLP HTTP {daemon.http_url.removeprefix('http://')}" in serving

    failing = [m for m in messages if "is failing" in m]
    assert len(failing) == 1 and failing[0].startswith("judge openai/gpt-4o-mini is failing: ")
    # the four runs are judged concurrently: any of the failures may come first
    assert re.match(
        r"judge \S+ is failing: (InternalServerError \(500\)|RateLimitError \(429\)|AuthenticationError)", failing[0]
    )
    recovered = [m for m in messages if "answering again" in m]
    assert len(recovered) == 1
    assert recovered[0].startswith("judge openai/gpt-4o-mini answering again after 4 failed request(s) in ")
    assert "RateLimitError (429) x1" in recovered[0] and "AuthenticationError (401) x1" in recovered[0]

    # LiteLLM: no per-call INFO lines, nothing through its own handler (which would not be JSON)
    assert not [r for r in records if r["logger"].lower().startswith("litellm") and r["level"] in ("DEBUG", "INFO")]
    assert not [r for r in records if r["logger"].startswith(("httpx", "httpcore", "openai"))]
    assert not any("warmup" in line or "warm up" in line for line in daemon.log().splitlines())
    keys = [(r["time"], r["logger"], r["message"]) for r in records]
    assert len(keys) == len(set(keys)), f"doubled lines: {[k for k in keys if keys.count(k) > 1]}"


def test_text_log_has_one_line_per_record_and_the_bound_addresses(tmp_path: Path) -> None:
    daemon = DaemonProcess(tmp_path, config_dict(tmp_path, log={"level": "DEBUG"})).start()
    assert daemon.stop() == 0
    log = daemon.log()
    assert re.search(r" INFO tracescorer\.app: tracescorer \S+ serving \(pid \d+\): OTLP gRPC 127\.0\.0\.1:\d+", log)
    assert " DEBUG tracescorer." in log  # debug is the daemon's own, libraries stay at WARNING
    assert not re.search(r" (DEBUG|INFO) (asyncio|aiohttp|grpc|httpx|LiteLLM)", log)
