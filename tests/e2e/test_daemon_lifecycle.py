"""The real ``tracescorer serve`` process: restart, SIGTERM under load, CLI reads while serving."""

from __future__ import annotations

import signal
import threading
import urllib.error
import urllib.request

from support.daemon import DaemonProcess, plain_config, wait_for
from support.otlp import agent_trace, span_exporter, tracer
from support.payloads import trace_request

from tracescorer.store.duckdb import open_read_only


def _send_batches(url: str, stop: threading.Event, acked: list[str], errors: list[str], worker: int) -> None:
    """Send 50-span requests until told to stop, remembering the span ids of every 2xx answer."""
    n = 0
    while not stop.is_set():
        n += 1
        ids = [f"{worker:02x}{n:06x}{i:08x}" for i in range(50)]
        body = trace_request(
            [{"trace_id": f"{worker:02x}{n:030x}", "span_id": sid, "name": "load"} for sid in ids]
        ).SerializeToString()
        req = urllib.request.Request(url + "/v1/traces", data=body, headers={"Content-Type": "application/x-protobuf"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                if resp.status == 200:
                    acked.extend(ids)
        except urllib.error.HTTPError as exc:
            errors.append(str(exc.code))  # 503 while shutting down: not acknowledged
        except OSError:
            return  # connection refused: the daemon is gone


def test_sigterm_under_load_loses_nothing_acknowledged(tmp_path):
    daemon = DaemonProcess(tmp_path, plain_config(tmp_path)).start()
    stop = threading.Event()
    acked: list[str] = []
    errors: list[str] = []
    workers = [threading.Thread(target=_send_batches, args=(daemon.http_url, stop, acked, errors, w)) for w in range(4)]
    for w in workers:
        w.start()
    wait_for(lambda: len(acked) >= 2000, 30, what="some acknowledged spans")
    code = daemon.stop(signal.SIGTERM)
    stop.set()
    for w in workers:
        w.join(30)
    assert code == 0, daemon.log()
    con = open_read_only(daemon.db_path)
    stored = {r[0] for r in con.execute("SELECT span_id FROM spans").fetchall()}
    con.close()
    missing = set(acked) - stored
    assert not missing, f"{len(missing)} acknowledged spans lost"
    assert set(errors) <= {"503"}


def test_restart_keeps_rows_and_cli_reads_while_serving_and_after(tmp_path):
    """Also: the query row limit and bad SQL through the CLI while serving."""
    daemon = DaemonProcess(tmp_path, plain_config(tmp_path, store={"query_max_rows": 5})).start()
    with tracer(span_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint)) as t:
        agent_trace(t)
    daemon.settled()
    # read while serving: goes through the daemon's query endpoint
    rows = daemon.query_json("SELECT name, count(*) AS n FROM spans GROUP BY name ORDER BY name")
    assert rows == [
        {"name": "chat gpt-4o-mini", "n": 2},
        {"name": "execute_tool get_weather", "n": 1},
        {"name": "invoke_agent weather", "n": 1},
    ]
    refused = daemon.cli("query", "DELETE FROM spans", check=False)
    assert refused.returncode != 0 and "only read statements" in refused.stderr
    table = daemon.cli("query", "SELECT count(*) AS spans FROM spans").stdout
    assert table.splitlines()[0].strip() == "spans" and "4" in table.splitlines()[2]
    result = daemon.cli("query", "SELECT * FROM range(100)")  # store.query_max_rows: 5
    assert "(5 rows)" in result.stdout and "truncated at 5 rows" in result.stderr
    bad = daemon.cli("query", "SELEC nonsense", check=False)
    assert bad.returncode != 0 and "Error" in bad.stderr
    assert daemon.stop() == 0

    # not serving: the file is opened read-only
    rows = daemon.query_json("SELECT count(*) AS n FROM spans")
    assert rows == [{"n": 4}]
    csv_out = daemon.cli(
        "query", "SELECT service_name, kind FROM spans ORDER BY start_time LIMIT 1", "--format", "csv"
    ).stdout
    assert csv_out.splitlines() == ["service_name,kind", "test-agent,internal"]
    refused = daemon.cli("query", "INSERT INTO spans (trace_id, span_id) VALUES ('a', 'b')", check=False)
    assert refused.returncode != 0 and "only read statements" in refused.stderr

    # restart: old rows are still there, new ones are added
    daemon.start()
    with tracer(span_exporter("http", http_url=daemon.http_url)) as t:
        agent_trace(t)
    daemon.settled()
    assert daemon.query_json("SELECT count(*) AS n FROM spans") == [{"n": 8}]
    assert daemon.stop() == 0


def test_serve_fails_clearly_on_bad_config(tmp_path):
    cfg = plain_config(tmp_path)
    cfg["store"]["retention_dayz"] = 3
    daemon = DaemonProcess(tmp_path, cfg)
    result = daemon.cli("serve", check=False)
    assert result.returncode != 0
    assert "store.retention_dayz: unknown key" in result.stderr


def test_check_config_masks_secrets_and_applies_env(tmp_path):
    cfg = plain_config(tmp_path, receiver={"auth_token": "${MY_TOKEN:-fallback}"})
    daemon = DaemonProcess(tmp_path, cfg, env={"MY_TOKEN": "topsecret", "TRACESCORER_STORE__RETENTION_DAYS": "7"})
    out = daemon.cli("check-config").stdout
    assert "topsecret" not in out and "auth_token: '***'" in out
    assert "retention_days: 7" in out


def test_daemon_with_only_code_scorers_never_imports_litellm(tmp_path):
    """litellm costs ~3 s and ~190 MB at import: it stays off the start-up path without LLM scorers."""
    import subprocess
    import sys

    script = f"""
import asyncio, sys
from tracescorer.app import App
from tracescorer.config import Settings
s = Settings.model_validate({{
    "receiver": {{"grpc": {{"host": "127.0.0.1", "port": 0}}, "http": {{"host": "127.0.0.1", "port": 0}}}}, "api": {{"port": 0}},
    "store": {{"path": {str(tmp_path / "x.duckdb")!r}}},
    "scorers": [{{"id": "non-empty", "prebuilt": "non_empty_response"}}],
}})
async def main():
    app = App(s)
    await app.start()
    await app.stop()
asyncio.run(main())
print("litellm" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
