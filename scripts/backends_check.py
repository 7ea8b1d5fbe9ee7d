"""``make backends-check``: scores shown by real Arize Phoenix and MLflow servers, traces unchanged.

Installs Phoenix and MLflow in their own venvs under ``.cache/backends/`` (once), starts each on
127.0.0.1, sends a captured OpenInference agent conversation to both (as the agent's own SDK or
Collector would), records what each backend shows for the agent traces, then replays the same
capture into a tracescorer daemon whose export sinks point at both backends (evaluation spans
over OTLP, Phoenix annotations, MLflow assessments) and checks through each backend's own API
that every score is there on the agent span (conversation scores: Phoenix session, MLflow first
trace of the session) and that each trace's duration, status and ``service.name`` are unchanged.
Not part of ``make test``: it downloads two large packages and starts two servers.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from fakes.fake_openai import FakeOpenAI, Reply  # noqa: E402
from support.daemon import DaemonProcess, config_dict  # noqa: E402

CACHE = REPO / ".cache" / "backends"
PHOENIX = "arize-phoenix==20.26.1"
MLFLOW = "mlflow==3.17.2"
CAPTURE = REPO / "tests" / "data" / "captures" / "py-openinference-openai-session-tools"
FAILING_SCORER = """
from tracescorer import create_scorer


def _fail(*, run, results):
    raise RuntimeError("scorer failed on purpose (backends-check)")


always_fails = create_scorer(id="always-fails", description="raises").generate_score(_fail)
"""
failures: list[str] = []


def say(message: str) -> None:
    print(message, flush=True)


def check(ok: bool, message: str) -> None:
    say(("ok    " if ok else "FAIL  ") + message)
    if not ok:
        failures.append(message)


def venv(name: str, spec: str) -> Path:
    root = CACHE / name
    marker = root / f".installed-{spec}"
    if not marker.exists():
        say(f"== installing {spec} into {root} (once)")
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
        subprocess.run([str(root / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", spec], check=True)
        marker.touch()
    return root / "bin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(method: str, url: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, _parse(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, _parse(exc.read())


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode(errors="replace")


def wait(predicate: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = predicate()
        except (OSError, urllib.error.URLError):
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(interval_s)


def start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    out = open(log, "wb")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(cmd, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT)


def replay(endpoint: str, *headers: str) -> None:
    args = [sys.executable, "-m", "tracescorer", "replay", str(CAPTURE), "--endpoint", endpoint]
    for header in headers:
        args += ["--header", header]
    subprocess.run(args, check=True, cwd=REPO, capture_output=True, timeout=120)


# --- what each backend shows -----------------------------------------------------------------------


def phoenix_trace(base: str, trace_id: str) -> dict[str, Any] | None:
    status, body = http("GET", f"{base}/v1/projects/default/traces?include_spans=true&limit=100")
    if status != 200:
        return None
    return next((t for t in body["data"] if t["trace_id"] == trace_id), None)


def phoenix_view(trace: dict[str, Any]) -> dict[str, Any]:
    agent_spans = [s for s in trace["spans"] if s.get("span_kind") != "EVALUATOR"]
    return {
        "start_time": trace["start_time"],
        "end_time": trace["end_time"],
        "error_spans": sorted(s["span_id"] for s in agent_spans if s["status_code"] == "ERROR"),
        "spans": len(agent_spans),
    }


def mlflow_trace(base: str, trace_id: str) -> dict[str, Any] | None:
    status, body = http("GET", f"{base}/api/3.0/mlflow/traces/tr-{trace_id}")
    if status != 200:
        return None
    return body["trace"]["trace_info"]  # type: ignore[no-any-return]


def mlflow_view(info: dict[str, Any]) -> dict[str, Any]:
    return {
        "execution_duration": info.get("execution_duration"),
        "state": info.get("state"),
        "service.name": (info.get("tags") or {}).get("service.name"),
    }


def main() -> int:
    phoenix_bin, mlflow_bin = venv("phoenix", PHOENIX), venv("mlflow", MLFLOW)
    work = Path(tempfile.mkdtemp(prefix="backends-check-"))
    procs: list[subprocess.Popen[bytes]] = []
    px_port, px_grpc, ml_port = free_port(), free_port(), free_port()
    px, ml = f"http://127.0.0.1:{px_port}", f"http://127.0.0.1:{ml_port}"
    daemon: DaemonProcess | None = None
    try:
        say(f"== starting Phoenix ({PHOENIX}) on {px} and MLflow ({MLFLOW}) on {ml}; work dir {work}")
        procs.append(
            start(
                [str(phoenix_bin / "phoenix"), "serve"],
                {
                    "PHOENIX_HOST": "127.0.0.1",
                    "PHOENIX_PORT": str(px_port),
                    "PHOENIX_GRPC_PORT": str(px_grpc),
                    "PHOENIX_WORKING_DIR": str(work / "phoenix"),
                    "PHOENIX_TELEMETRY_ENABLED": "false",
                },
                work / "phoenix.log",
            )
        )
        procs.append(
            start(
                [
                    str(mlflow_bin / "mlflow"),
                    "server",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(ml_port),
                    "--workers",
                    "1",
                    "--backend-store-uri",
                    f"sqlite:///{work}/mlflow.db",
                    "--default-artifact-root",
                    str(work / "mlartifacts"),
                ],
                {"MLFLOW_DISABLE_TELEMETRY": "true"},
                work / "mlflow.log",
            )
        )
        wait(lambda: http("GET", f"{px}/healthz")[0] == 200, 300, "Phoenix /healthz")
        wait(lambda: http("GET", f"{ml}/health")[0] == 200, 300, "MLflow /health")
        status, body = http("POST", f"{ml}/api/2.0/mlflow/experiments/create", {"name": "tracescorer-check"})
        assert status == 200, body
        experiment = body["experiment_id"]
        say(f"== both up; MLflow experiment {experiment}")

        # the agent's own traces reach both backends first (SDK / Collector fan-out)
        replay(px)
        replay(ml, f"x-mlflow-experiment-id={experiment}")

        judge = FakeOpenAI()
        judge.script("Criterion:", Reply.json({"satisfied": True, "reasoning": "both questions answered"}))
        judge.start()
        (work / "checkscorers.py").write_text(FAILING_SCORER)
        cfg = config_dict(
            work,
            assembly={"idle_s": 1.0, "conversation_idle_s": 3.0},
            judge={"model": "openai/gpt-4o-mini", "api_base": judge.base_url, "api_key": "k", "timeout_s": 20},
            scorers=[
                {"id": "non-empty", "prebuilt": "non_empty_response", "scope": "run", "threshold": 1},
                {"id": "always-fails", "python": "checkscorers:always_fails", "scope": "run"},
                {
                    "id": "multi-turn-judge-scorer",
                    "prebuilt": "multi_turn_judge",
                    "scope": "conversation",
                    "options": {"criterion": "Every question is answered"},
                    "threshold": 1,
                },
            ],
            export={
                "enabled": True,
                "interval_s": 0.5,
                "sinks": [
                    {"otlp": {"endpoint": px, "protocol": "http/protobuf"}},
                    {
                        "otlp": {
                            "endpoint": ml,
                            "protocol": "http/protobuf",
                            "headers": {"x-mlflow-experiment-id": experiment},
                        }
                    },
                    {"phoenix": {"endpoint": px}},
                    {"mlflow": {"tracking_uri": ml, "experiment_id": experiment}},
                ],
            },
        )
        daemon = DaemonProcess(work, cfg, env={"PYTHONPATH": f"{work}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
        daemon.start()
        say(f"== tracescorer serving (sinks otlp -> Phoenix, otlp#2 -> MLflow, phoenix, mlflow); log {daemon.log_path}")
        replay(daemon.http_url)
        runs = wait(
            lambda: (lambda r: r if len(r) >= 2 else None)(
                daemon.query_json(
                    "SELECT run_id, trace_id, span_id, conversation_id, service_name FROM runs ORDER BY started_at_unix_nano"
                )
            ),
            60,
            "2 runs assembled",
        )
        trace_ids = sorted({r["trace_id"] for r in runs})
        say(f"== {len(runs)} runs in {len(trace_ids)} traces, conversation {runs[0]['conversation_id']}")

        before_px = {
            t: phoenix_view(wait(lambda t=t: phoenix_trace(px, t), 60, f"Phoenix trace {t}")) for t in trace_ids
        }
        before_ml = {t: mlflow_view(wait(lambda t=t: mlflow_trace(ml, t), 60, f"MLflow trace {t}")) for t in trace_ids}

        expected = len(runs) * 2 + 1
        scores = wait(
            lambda: (lambda r: r if len(r) >= expected else None)(
                daemon.query_json(
                    "SELECT id, scorer_id, status, score, label, error, error_type, run_id, trace_id, span_id, "
                    "conversation_id, entity_type FROM scores"
                )
            ),
            120,
            f"{expected} scores",
        )

        def settled() -> list[dict[str, Any]] | None:
            rows = daemon.query_json("SELECT score_id, sink, status, attempts, last_error FROM score_deliveries")
            done = [r for r in rows if r["status"] != "pending"]
            return rows if len(done) == expected * 4 else None

        deliveries = wait(settled, 120, "every score delivered to 4 sinks")
        by_status: dict[str, int] = {}
        for d in deliveries:
            by_status[f"{d['sink']}:{d['status']}"] = by_status.get(f"{d['sink']}:{d['status']}", 0) + 1
        say(f"== deliveries: {json.dumps(by_status, sort_keys=True)}")
        for d in deliveries:
            check(
                d["status"] == "delivered",
                f"score {d['score_id']} delivered to {d['sink']} (attempts {d['attempts']}, error {d['last_error']})",
            )
        time.sleep(2.0)  # let both backends finish their asynchronous span inserts

        # --- Phoenix ---------------------------------------------------------------------------
        for s in scores:
            if s["entity_type"] == "conversation":
                status, body = http(
                    "GET", f"{px}/v1/projects/default/session_annotations?session_ids={s['conversation_id']}"
                )
                found = [a for a in body.get("data", []) if a["name"] == s["scorer_id"]] if status == 200 else []
                where = f"session {s['conversation_id']}"
            else:
                status, body = http("GET", f"{px}/v1/projects/default/span_annotations?span_ids={s['span_id']}")
                found = [a for a in body.get("data", []) if a["name"] == s["scorer_id"]] if status == 200 else []
                where = f"agent span {s['span_id']}"
            label = "error" if s["status"] == "error" else s["label"]
            check(
                len(found) == 1
                and found[0]["identifier"] == s["id"]
                and found[0]["result"]["label"] == label
                and (s["status"] == "error" or found[0]["result"]["score"] == s["score"]),
                f"Phoenix: annotation {s['scorer_id']} on {where}: "
                f"{json.dumps(found[0]['result']) if found else 'missing'}",
            )
        for t in trace_ids:
            trace = phoenix_trace(px, t)
            assert trace is not None
            evaluators = [sp for sp in trace["spans"] if sp.get("span_kind") == "EVALUATOR"]
            after = phoenix_view(trace)
            check(after == before_px[t], f"Phoenix: trace {t} unchanged: {json.dumps(after)}")
            check(
                len(evaluators) >= 2,
                f"Phoenix: trace {t} has {len(evaluators)} EVALUATOR spans, "
                f"statuses {sorted({sp['status_code'] for sp in evaluators})}",
            )

        # --- MLflow ----------------------------------------------------------------------------
        first_trace = runs[0]["trace_id"]
        for t in trace_ids:
            info = mlflow_trace(ml, t)
            assert info is not None
            after = mlflow_view(info)
            check(after == before_ml[t], f"MLflow: trace tr-{t} unchanged: {json.dumps(after)}")
            for s in scores:
                on_this = (s["entity_type"] == "conversation" and t == first_trace) or (
                    s["entity_type"] != "conversation" and s["trace_id"] == t
                )
                if not on_this:
                    continue
                found = [a for a in info.get("assessments", []) if a.get("assessment_name") == s["scorer_id"]]
                a = found[0] if len(found) == 1 else {}
                if s["entity_type"] == "conversation":
                    ok = a.get("metadata", {}).get("mlflow.trace.session") == s["conversation_id"] and not a.get(
                        "span_id"
                    )
                else:
                    ok = a.get("span_id") == s["span_id"]
                feedback = a.get("feedback", {})
                ok = ok and (("error" in feedback) if s["status"] == "error" else feedback.get("value") == s["score"])
                check(
                    ok,
                    f"MLflow: assessment {s['scorer_id']} on tr-{t}"
                    f"{'' if s['entity_type'] == 'conversation' else ' span ' + str(s['span_id'])}: "
                    f"{json.dumps(feedback) if a else 'missing'}",
                )
        say(f"== {'all checks passed' if not failures else str(len(failures)) + ' check(s) FAILED'}")
        return 1 if failures else 0
    finally:
        if daemon is not None and daemon.proc is not None:
            code = daemon.stop()
            say(f"== tracescorer stopped (exit {code})")
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        if failures:
            for name in ("phoenix.log", "mlflow.log", "daemon.log"):
                path = work / name
                if path.exists():
                    say(f"== last lines of {path}")
                    say("\n".join(path.read_text(errors="replace").splitlines()[-25:]))


if __name__ == "__main__":
    sys.exit(main())
