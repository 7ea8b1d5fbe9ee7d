"""Reloading the configuration while the daemon serves (tracescorer/daemon/reload.py): a reload
that adds a binding scores the next run with it while a conversation being scored finishes with
its claim; an invalid file or one changing a key only a restart applies is refused, saying why,
and the running bindings keep scoring; SIGHUP to a real ``serve`` with worker processes reloads
and the process keeps serving."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import gated
from support.clock import ManualClock
from support.daemon import DaemonProcess, app_metric, config_dict, wait_for, wait_for_async
from support.db import fetch
from support.otlp import agent_trace, span_exporter, tracer

from tracescorer.app import App
from tracescorer.config import load_settings
from tracescorer.daemon.reload import ReloadRefused

IDLE_S = 600.0
TURN = {"id": "turn", "prebuilt": "non_empty_response"}
WHOLE = {"id": "gated", "python": "support.gated:scorer", "scope": "conversation"}
ADDED = {"id": "added", "prebuilt": "non_empty_response"}


def _count(scorer_id: str) -> str:
    return f"SELECT count(*) FROM scores WHERE scorer_id = '{scorer_id}'"


async def test_a_reload_adds_a_binding_for_the_next_run_while_a_conversation_in_flight_keeps_its_claim(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    cfg = config_dict(
        tmp_path,
        workers={"count": 0},
        assembly={"idle_s": 0.2, "conversation_idle_s": IDLE_S},
        scorers=[TURN, WHOLE],
    )
    path = tmp_path / "tracescorer.yaml"
    path.write_text(yaml.safe_dump(cfg))
    gated.GATE.clear()
    gated.STARTED.clear()
    app = App(load_settings(path), clock=clock, config_path=path)
    await app.start()
    try:

        def send(answer: str) -> None:
            with tracer(span_exporter("http", http_url=f"http://127.0.0.1:{app.http_port}")) as t:
                agent_trace(t, answer=answer)  # conversation conv-1

        async def scored(scorer_id: str, n: int) -> bool:
            clock.advance(0.1)  # assembly.idle_s passes on the same clock
            return await fetch(app.stores.queries, _count(scorer_id)) == [(n,)]

        await asyncio.to_thread(send, "first")
        await wait_for_async(lambda: scored("turn", 1), 60, interval_s=0.05, what="the turn scored")
        idle = app.pipeline.conversations if app.pipeline is not None else None
        assert idle is not None
        clock.advance(IDLE_S + 1)
        await idle.tick()  # type: ignore[attr-defined]
        await wait_for_async(gated.STARTED.is_set, 30, what="the conversation claimed and being scored")

        hash_before = await _config_hash(app)
        cfg["scorers"] = [TURN, WHOLE, ADDED]
        path.write_text(yaml.safe_dump(cfg))
        done = await app.reload()
        assert done.changed == ["scorers"] and done.hash != hash_before
        assert await _config_hash(app) == done.hash
        assert await app_metric(app, "tracescorer_config_reloads_total", result="applied") == 1.0

        await asyncio.to_thread(send, "second")  # the next run: scored by the new binding too
        await wait_for_async(lambda: scored("added", 1), 60, interval_s=0.05, what="the new binding's score")
        assert await fetch(app.stores.queries, _count("gated")) == [(0,)]  # still at the gate
        gated.GATE.set()  # the conversation decided before the reload finishes with its claim
        await wait_for_async(lambda: scored("gated", 1), 30, interval_s=0.05, what="the conversation score")
        rows = await fetch(app.stores.queries, "SELECT count(*) FROM scoring_decisions WHERE scorer_id = 'gated'")
        assert rows == [(1,)]
        # the run stored before the reload is not scored by the binding added after it
        assert await fetch(app.stores.queries, _count("added")) == [(1,)]
    finally:
        gated.GATE.set()
        await app.stop()


async def _config_hash(app: App) -> str:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(app.metrics.render().decode()):
        for sample in family.samples:
            if sample.name == "tracescorer_config_info" and sample.value == 1:
                return sample.labels["hash"]
    raise AssertionError("no tracescorer_config_info sample")


async def test_an_invalid_reload_is_refused_in_process_and_the_old_bindings_stay(tmp_path: Path) -> None:
    cfg = config_dict(tmp_path, workers={"count": 0}, assembly={"idle_s": 0.2}, scorers=[TURN])
    path = tmp_path / "tracescorer.yaml"
    path.write_text(yaml.safe_dump(cfg))
    app = App(load_settings(path), config_path=path)
    await app.start()
    try:
        path.write_text("scorers: [\n")
        with pytest.raises(ReloadRefused, match="not valid YAML"):
            await app.reload()
        path.write_text(yaml.safe_dump({**cfg, "scorers": [TURN, {"id": "x", "prebuilt": "no_such_scorer"}]}))
        with pytest.raises(ReloadRefused, match="no_such_scorer"):
            await app.reload()
        path.write_text(yaml.safe_dump({**cfg, "receiver": {**cfg["receiver"], "http": {"port": 4999}}}))
        with pytest.raises(ReloadRefused, match=r"receiver\.http\.port.*restart") as refused:
            await app.reload()
        assert refused.value.restart == ["receiver.http.port"]
        path.write_text(yaml.safe_dump({**cfg, "scorers": [TURN, WHOLE]}))
        with pytest.raises(ReloadRefused, match="first conversation-scope binding needs a restart"):
            await app.reload()
        assert await app_metric(app, "tracescorer_config_reloads_total", result="refused") == 4.0
        assert [b.binding.id for b in app.runner.bindings] == ["turn"]
        with tracer(span_exporter("http", http_url=f"http://127.0.0.1:{app.http_port}")) as t:
            await asyncio.to_thread(agent_trace, t)

        async def turn_scored() -> bool:
            return await fetch(app.stores.queries, _count("turn")) == [(1,)]

        await wait_for_async(turn_scored, 60, what="the old binding's score")
    finally:
        await app.stop()


def _post_reload(daemon: DaemonProcess) -> tuple[int, dict[str, Any]]:
    assert daemon.info is not None
    req = urllib.request.Request(
        daemon.info.api_url + "/api/v1/reload",
        data=b"{}",
        headers={"Authorization": f"Bearer {daemon.info.api_token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_sighup_reloads_a_serving_daemon_and_its_worker_processes(tmp_path: Path) -> None:
    cfg = config_dict(tmp_path, workers={"count": 2}, assembly={"idle_s": 0.2}, scorers=[TURN])
    daemon = DaemonProcess(tmp_path, cfg, new_session=True).start()
    assert daemon.proc is not None
    try:
        # a closing terminal sends SIGHUP to the whole group: the store and worker processes ignore it
        cfg["scorers"] = [TURN, ADDED]
        cfg["log"] = {"level": "debug"}
        daemon.config_path.write_text(yaml.safe_dump(cfg))
        os.killpg(daemon.proc.pid, signal.SIGHUP)
        wait_for(
            lambda: daemon.metric('tracescorer_config_reloads_total{result="applied"}') == 1.0,
            60,
            what="the reload counted",
        )
        assert "configuration reloaded" in daemon.log() and "scorers, log.level" in daemon.log()
        # every worker rebound: traces spread over both workers are all scored by the new binding
        with tracer(span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint)) as t:
            for i in range(8):
                agent_trace(t, answer=f"answer {i}")
        wait_for(lambda: daemon.query_json(_count("added"))[0]["count_star()"] == 8, 60, what="8 scores of 'added'")
        assert daemon.query_json(_count("turn"))[0]["count_star()"] == 8

        # refused: the daemon says why (HTTP 4xx, the CLI's exit status and message) and keeps its bindings
        daemon.config_path.write_text(yaml.safe_dump({**cfg, "scorers": [TURN, {"id": "x", "prebuilt": "nope"}]}))
        status, body = _post_reload(daemon)
        assert status == 400 and "nope" in body["error"], body
        result = daemon.cli("reload", check=False)
        assert result.returncode == 1 and "reload refused" in result.stderr and "nope" in result.stderr
        daemon.config_path.write_text(yaml.safe_dump({**cfg, "workers": {"count": 3}}))
        status, body = _post_reload(daemon)
        assert status == 409 and body["restart"] == ["workers.count"], body
        result = daemon.cli("reload", check=False)
        assert result.returncode == 1 and "workers.count" in result.stderr and "restart" in result.stderr
        daemon.config_path.write_text("scorers: [\n")
        result = daemon.cli("reload", check=False)
        assert result.returncode == 1 and "not valid YAML" in result.stderr
        os.kill(daemon.proc.pid, signal.SIGHUP)  # refused by the daemon itself too
        wait_for(
            lambda: daemon.metric('tracescorer_config_reloads_total{result="refused"}') == 5.0,
            60,
            what="the refusals counted",
        )
        assert daemon.proc.poll() is None
        with tracer(span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint)) as t:
            agent_trace(t, answer="after the refusals")
        wait_for(lambda: daemon.query_json(_count("added"))[0]["count_star()"] == 9, 60, what="the 9th score")

        daemon.config_path.write_text(yaml.safe_dump(cfg))
        result = daemon.cli("reload")
        assert "configuration reloaded" in result.stdout and "nothing changed" in result.stdout
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()
