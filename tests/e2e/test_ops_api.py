"""The ops API apart from OTLP: its own loopback listener and token (never the ingest token);
/healthz and /readyz open on the OTLP port, /metrics behind metrics.auth_token when set;
/readyz tells the reason a readiness provider gives."""

from __future__ import annotations

import json
import os
import stat
import urllib.error
import urllib.request

import pytest
from aiohttp import web
from support.daemon import DaemonProcess, config_dict, running_app, settings_for

from tracescorer.api import OpsApi
from tracescorer.config import WorkersSettings
from tracescorer.control import QUERY_PATH, serve_info_path
from tracescorer.metrics import Metrics
from tracescorer.store.duckdb import DuckDBStore

INGEST_TOKEN = "ingest-token-for-tests"


def _call(url: str, token: str | None = None, body: dict | None = None) -> tuple[int, str]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_ops_listener_on_loopback_with_its_own_token(tmp_path):
    cfg = config_dict(tmp_path, receiver={"auth_token": INGEST_TOKEN}, metrics={"auth_token": "scrape-token"})
    daemon = DaemonProcess(tmp_path, cfg).start()
    try:
        info = daemon.info
        assert info is not None and info.api_url.startswith("http://127.0.0.1:")
        assert info.api_url != info.url and info.api_token and info.api_token != INGEST_TOKEN
        state = serve_info_path(daemon.db_path)
        assert stat.S_IMODE(os.stat(state).st_mode) == 0o600
        query = {"sql": "SELECT count(*) AS n FROM spans"}
        assert _call(info.api_url + QUERY_PATH, info.api_token, query)[0] == 200
        # the ingest token, no token, a wrong token: refused
        for token in (INGEST_TOKEN, None, "nope"):
            code, body = _call(info.api_url + QUERY_PATH, token, query)
            assert code == 401 and "bearer token" in body
        # the OTLP port has no query route at all, whatever the token
        assert _call(info.url + QUERY_PATH, INGEST_TOKEN, query)[0] == 404
        # health and readiness stay open on the OTLP port (for probes), metrics need their token
        assert _call(info.url + "/healthz")[0] == 200
        code, body = _call(info.url + "/readyz")
        ready = json.loads(body)  # the verdict, and how far the feed is behind the segment log
        assert code == 200 and ready["ready"] is True, body
        # a daemon started as deployed: with its worker processes (one per core), each listed
        workers = {"workers"} if WorkersSettings().resolved() else set()
        assert set(ready["detail"]) == {"feed_lag_bytes", "feed_lag_seconds", "feed_held_by"} | workers
        assert all(w["pid"] and w["down"] is None for w in ready["detail"].get("workers", ()))
        assert ready["detail"]["feed_lag_bytes"] >= 0
        assert _call(info.url + "/metrics")[0] == 401
        assert _call(info.url + "/metrics", INGEST_TOKEN)[0] == 401
        code, text = _call(info.url + "/metrics", "scrape-token")
        assert code == 200 and "tracescorer_receiver_requests" in text
        # the CLI finds the ops API from the state file
        out = daemon.cli("query", "SELECT count(*) AS n FROM spans", "--format", "json").stdout
        assert json.loads(out) == [{"n": 0}]
    finally:
        assert daemon.stop() == 0, daemon.log()
    assert not serve_info_path(daemon.db_path).exists()


async def test_metrics_open_without_a_metrics_token_and_api_port_conflicts(tmp_path):
    settings = settings_for(tmp_path)
    async with running_app(settings) as app:
        url = f"http://127.0.0.1:{app.http_port}"
        status, text = await _aget(url + "/metrics")
        assert status == 200 and "tracescorer_store_commits" in text
        assert app.api_port not in (0, 4317, 4318, app.http_port, app.grpc_port)
        # a second daemon on the same ops API port: the error names the listener and address
        clash = settings_for(tmp_path / "b", api={"port": app.api_port})
        (tmp_path / "b").mkdir()
        from tracescorer.app import App

        second = App(clash)
        with pytest.raises(OSError, match=rf"ops API \(api\): cannot listen on 127\.0\.0\.1:{app.api_port}"):
            await second.start()
        await second.stop()


async def _aget(url: str) -> tuple[int, str]:
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.text()


async def test_readyz_reports_the_providers_reason(tmp_path):
    store = DuckDBStore(tmp_path / "r.duckdb")
    await store.start()
    reasons: list[str | None] = ["database writes are failing: disk full"]
    ops = OpsApi(store, Metrics(), readiness=lambda: reasons[0])
    ops.ready = True
    webapp = web.Application()
    webapp.add_routes(ops.routes())
    runner = web.AppRunner(webapp)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        status, text = await _aget(f"http://127.0.0.1:{port}/readyz")
        assert status == 503 and json.loads(text) == {
            "ready": False,
            "reason": "database writes are failing: disk full",
        }
        reasons[0] = None
        assert await _aget(f"http://127.0.0.1:{port}/readyz") == (200, json.dumps({"ready": True}))
        # the default provider: not ready before start / while stopping
        default = OpsApi(store, Metrics())
        assert default.default_readiness() == "not started or shutting down"
        default.ready = True
        assert default.default_readiness() is None
    finally:
        await runner.cleanup()
        await store.stop()
