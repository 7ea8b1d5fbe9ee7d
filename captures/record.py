"""Record one capture: run a real framework's client against the fake model and keep its OTLP.

    python captures/record.py tests/data/captures/<case> [--cache .cache/captures]

The case folder holds the client: ``client.py`` (its first line ``# venv: <env>`` names the
capture environment under ``--cache``, built by ``make captures-envs``) or ``client/run.mjs``
(``// env: <env>``: a node_modules environment). The client reads ``OPENAI_BASE_URL`` /
``LLM_BASE_URL`` (the fake model, ``tests/fakes/agent_openai.py``'s :class:`AutoAgentOpenAI`)
and ``OTLP_HTTP_ENDPOINT`` / ``OTLP_GRPC_ENDPOINT`` (``tests/fakes/otlp_capture.py``) and exports
with the framework's own OpenTelemetry code. Written into the case folder: ``requests/NNNN.pb``
and ``logs/NNNN.pb`` (the export bodies in arrival order; only machine-specific resource
attributes are rewritten), ``decoded.txt`` (every span and log record) and ``model.jsonl`` (what
the fake model was asked and answered). ``expected.json`` is written by hand, never here.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakes.agent_openai import AutoAgentOpenAI  # noqa: E402
from fakes.otlp_capture import OtlpCapture, any_value  # noqa: E402
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue  # noqa: E402

_ENV_LINE = re.compile(r"^(?:#|//)\s*(?:venv|env):\s*(\S+)")
#: Resource attributes that describe the recording machine, not the framework.
_MACHINE = {
    "host.name": "capture-host",
    "host.id": None,
    "process.owner": "user",
    "process.executable.path": "python",
    "process.command": "client.py",
    "process.command_line": "client.py",
    "process.command_args": None,
    "service.instance.id": None,
    "os.description": None,
    "process.pid": None,
    "process.parent_pid": None,
    "host.arch": None,
}


def _sanitise(resource_attrs: Any) -> bool:
    """Rewrite machine-specific resource attributes in place; whether anything changed."""
    changed = False
    keep: list[KeyValue] = []
    for kv in resource_attrs:
        if kv.key in _MACHINE:
            changed = True
            replacement = _MACHINE[kv.key]
            if replacement is None:
                continue
            kv.value.Clear()
            kv.value.string_value = replacement
        keep.append(kv)
    if changed:
        copies = [KeyValue.FromString(kv.SerializeToString()) for kv in keep]
        del resource_attrs[:]
        resource_attrs.extend(copies)
    return changed


_PATH_KEYS = ("code.filepath", "code.file.path")
_SITE = re.compile(r"^/.*?/(site-packages|node_modules)/")


def _relative_paths(attrs: Any) -> bool:
    """Source paths of the recording machine's environments (``code.filepath``) made relative."""
    changed = False
    for kv in attrs:
        if kv.key in _PATH_KEYS and kv.value.string_value.startswith("/"):
            kv.value.string_value = _SITE.sub(r"\1/", kv.value.string_value)
            changed = True
    return changed


def sanitised_traces(raw: bytes) -> bytes:
    req = ExportTraceServiceRequest.FromString(raw)
    changed = [_sanitise(rs.resource.attributes) for rs in req.resource_spans]
    changed += [_relative_paths(s.attributes) for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
    return req.SerializeToString() if any(changed) else raw


def sanitised_logs(raw: bytes) -> bytes:
    req = ExportLogsServiceRequest.FromString(raw)
    changed = [_sanitise(rl.resource.attributes) for rl in req.resource_logs]
    changed += [
        _relative_paths(r.attributes) for rl in req.resource_logs for sl in rl.scope_logs for r in sl.log_records
    ]
    return req.SerializeToString() if any(changed) else raw


def _fmt(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=lambda b: b.hex() if isinstance(b, bytes) else str(b))


def decoded_text(case: str, traces: list[bytes], logs: list[bytes]) -> str:
    """Every span and log record of the capture, one attribute a line."""
    out = [
        f"# decoded with opentelemetry-proto from {case}",
        f"# trace requests: {len(traces)}; log requests: {len(logs)}",
    ]
    for i, raw in enumerate(traces, 1):
        out.append(f"=== request requests/{i:04d}.pb ===")
        for rs in ExportTraceServiceRequest.FromString(raw).resource_spans:
            out.append("resource:")
            out += [f"  {kv.key} = {_fmt(any_value(kv.value))}" for kv in rs.resource.attributes]
            for ss in rs.scope_spans:
                out.append(f"  scope: name={ss.scope.name!r} version={ss.scope.version!r}")
                for s in ss.spans:
                    out.append(f"  - span name={s.name!r}")
                    out.append(
                        f"    trace_id={s.trace_id.hex()} span_id={s.span_id.hex()} "
                        f"parent_span_id={s.parent_span_id.hex()}"
                    )
                    out.append(
                        f"    kind={s.kind} status={s.status.code} {s.status.message!r} "
                        f"start={s.start_time_unix_nano} end={s.end_time_unix_nano}"
                    )
                    out += [f"      {kv.key} = {_fmt(any_value(kv.value))}" for kv in s.attributes]
                    for ev in s.events:
                        out.append(f"    event {ev.name!r} t={ev.time_unix_nano}")
                        out += [f"      {kv.key} = {_fmt(any_value(kv.value))}" for kv in ev.attributes]
    for i, raw in enumerate(logs, 1):
        out.append(f"=== request logs/{i:04d}.pb ===")
        for rl in ExportLogsServiceRequest.FromString(raw).resource_logs:
            for sl in rl.scope_logs:
                out.append(f"  scope: name={sl.scope.name!r}")
                for r in sl.log_records:
                    out.append(
                        f"  - log event_name={r.event_name!r} trace_id={r.trace_id.hex()} span_id={r.span_id.hex()}"
                    )
                    out.append(f"      body = {_fmt(any_value(r.body))}")
                    out += [f"      {kv.key} = {_fmt(any_value(kv.value))}" for kv in r.attributes]
    return "\n".join(out) + "\n"


def client_of(case: Path) -> tuple[list[str], str, Path]:
    """(command, env name, working directory) of the case's client."""
    script = case / "client.py"
    if not script.is_file():
        script = case / "client" / "run.mjs"
    first = script.read_text().splitlines()[0]
    m = _ENV_LINE.match(first)
    if not m:
        raise SystemExit(f"{script}: first line must name its environment ('# venv: NAME')")
    return [str(script)], m.group(1), script.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case", type=Path)
    ap.add_argument("--cache", type=Path, default=ROOT / ".cache" / "captures")
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    case = args.case.resolve()
    script, env_name, workdir = client_of(case)
    env_dir = (args.cache / env_name).resolve()
    if script[0].endswith(".mjs"):
        runner = env_dir / "run.mjs"  # ESM resolves packages next to the script: run it there
        shutil.copy(script[0], runner)
        command = ["node", str(runner)]
    else:
        command = [str(env_dir / "bin" / "python"), script[0]]
    if not Path(command[0]).exists() and command[0] != "node":
        raise SystemExit(f"capture environment {env_dir} is missing: run 'make captures-envs'")

    with AutoAgentOpenAI(model="gpt-4o-mini") as model, OtlpCapture() as otlp:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
        env.update(
            OPENAI_BASE_URL=model.base_url,
            OPENAI_API_BASE=model.base_url,
            LLM_BASE_URL=model.base_url,
            OPENAI_API_KEY="sk-fake-local",
            OTLP_HTTP_ENDPOINT=otlp.http_base_url,
            OTLP_GRPC_ENDPOINT=otlp.grpc_endpoint,
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
            PYTHONUNBUFFERED="1",
            CAPTURE_CASE=case.name,
            LITELLM_LOCAL_MODEL_COST_MAP="True",
        )
        proc = subprocess.run(command, cwd=workdir, env=env, timeout=args.timeout, capture_output=True, text=True)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr[-4000:])
        if proc.returncode != 0:
            raise SystemExit(f"client failed with exit code {proc.returncode}")
        traces = [sanitised_traces(e.raw) for e in otlp.trace_exports]
        logs = [sanitised_logs(e.raw) for e in otlp.log_exports]
        asked = [
            {
                "request": r.body.get("messages"),
                "tools": [t.get("function", {}).get("name") for t in r.body.get("tools") or ()],
                "stream": bool(r.body.get("stream")),
            }
            for r in model.requests
        ]
    if not traces:
        raise SystemExit("the client exported no traces")
    for sub, bodies in (("requests", traces), ("logs", logs)):
        folder = case / sub
        if folder.exists():
            shutil.rmtree(folder)
        if bodies:
            folder.mkdir()
            for i, raw in enumerate(bodies, 1):
                (folder / f"{i:04d}.pb").write_bytes(raw)
    (case / "decoded.txt").write_text(decoded_text(case.name, traces, logs))
    (case / "model.jsonl").write_text("".join(json.dumps(a, ensure_ascii=False) + "\n" for a in asked))
    print(f"{case.name}: {len(traces)} trace requests, {len(logs)} log requests, {len(asked)} model calls")


if __name__ == "__main__":
    main()
