"""``tracescorer demo``: the daemon's main job on built-in sample traffic, start to finish.

Starts ``tracescorer serve`` as a child process on free ports with a throw-away database, sends
a few multi-turn agent conversations through the OpenTelemetry SDK's OTLP exporter (the same
path a real agent takes), prints what the daemon stored, and stops it with SIGTERM.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from tracescorer import control

CONVERSATIONS: list[dict[str, Any]] = [
    {
        "id": "demo-conv-weather",
        "agent": "travel-assistant",
        "turns": [
            ("What's the weather in London tomorrow?", "get_weather", {"city": "London"}, "Rain, 14C",
             "Tomorrow in London: rain and 14C. Take an umbrella."),
            ("And in Paris?", "get_weather", {"city": "Paris"}, "Sunny, 22C",
             "Paris will be sunny and 22C, light clothes are fine."),
        ],
    },
    {
        "id": "demo-conv-refund",
        "agent": "support-bot",
        "turns": [
            ("I want a refund for order 1234.", None, None, None,
             "I'm sorry to hear that. Could you tell me why you want a refund?"),
            ("It arrived broken.", None, None, None, "Thanks, I've noted it. Anything else?"),
        ],
    },
    {
        "id": "demo-conv-flaky-tool",
        "agent": "travel-assistant",
        "turns": [
            ("Book me a hotel in Rome for Friday.", "book_hotel", {"city": "Rome", "day": "Friday"}, "ERROR: upstream timeout",
             "Sorry, the booking service failed. Please try again later."),
        ],
    },
]

SYSTEM = "You are a helpful assistant. Answer briefly."


def _messages(role: str, text: str) -> list[dict[str, Any]]:
    return [{"role": role, "parts": [{"type": "text", "content": text}]}]


def emit_conversations(grpc_endpoint: str) -> int:
    """Send the demo conversations as OTel GenAI spans through the SDK's gRPC exporter."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import Status, StatusCode

    provider = TracerProvider(resource=Resource.create({"service.name": "demo-agents"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=grpc_endpoint, insecure=True)))
    tracer = provider.get_tracer("tracescorer.demo")
    runs = 0
    for conv in CONVERSATIONS:
        history: list[dict[str, Any]] = []
        for user, tool, args, result, answer in conv["turns"]:
            new_input = _messages("user", user)
            with tracer.start_as_current_span(
                f"invoke_agent {conv['agent']}",
                attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": conv["agent"],
                    "gen_ai.conversation.id": conv["id"],
                    "gen_ai.system_instructions": json.dumps([{"type": "text", "content": SYSTEM}]),
                    "gen_ai.input.messages": json.dumps(history + new_input),
                    "gen_ai.output.messages": json.dumps(
                        [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
                    ),
                },
            ):
                model_attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                               "gen_ai.provider.name": "openai", "gen_ai.usage.input_tokens": 42,
                               "gen_ai.usage.output_tokens": 17}
                if tool:
                    with tracer.start_as_current_span("chat gpt-4o-mini", attributes=model_attrs):
                        pass
                    with tracer.start_as_current_span(
                        f"execute_tool {tool}",
                        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                                    "gen_ai.tool.call.id": f"call_{runs}", "gen_ai.tool.call.arguments": json.dumps(args),
                                    "gen_ai.tool.call.result": result},
                    ) as tool_span:
                        if result.startswith("ERROR"):
                            tool_span.set_status(Status(StatusCode.ERROR, result))
                with tracer.start_as_current_span("chat gpt-4o-mini", attributes=model_attrs):
                    pass
            history += new_input + _messages("assistant", answer)
            runs += 1
    provider.force_flush()
    provider.shutdown()
    return runs


def _cli(config: Path, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "tracescorer", *args, "--config", str(config)],
        capture_output=True, text=True, check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return out.stdout


def run_demo(*, keep: bool = False) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="tracescorer-demo-"))
    db = workdir / "demo.duckdb"
    config = workdir / "tracescorer.yaml"
    config.write_text(yaml.safe_dump({
        "receiver": {"grpc": {"host": "127.0.0.1", "port": 0}, "http": {"host": "127.0.0.1", "port": 0}},
        "store": {"path": str(db)},
        "assembly": {"idle_s": 0.5},
    }))
    log_file = open(workdir / "daemon.log", "wb")
    print(f"== starting tracescorer serve (workdir {workdir})", flush=True)
    proc = subprocess.Popen([sys.executable, "-m", "tracescorer", "serve", "--config", str(config)],
                            stdout=log_file, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        info = None
        while info is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                print((workdir / "daemon.log").read_text(), file=sys.stderr)
                print("daemon failed to start", file=sys.stderr)
                return 1
            info = control.read_serve_info(str(db))
            time.sleep(0.1)
        print(f"== daemon up: OTLP gRPC 127.0.0.1:{info.grpc_port}, OTLP HTTP {info.url}", flush=True)
        runs = emit_conversations(f"127.0.0.1:{info.grpc_port}")
        print(f"== sent {runs} agent runs in {len(CONVERSATIONS)} conversations via the OTel SDK exporter", flush=True)
        print("\n== tracescorer query: spans stored per agent and conversation", flush=True)
        print(_cli(config, "query",
                   "SELECT attributes->>'$.\"gen_ai.agent.name\"' AS agent, "
                   "attributes->>'$.\"gen_ai.conversation.id\"' AS conversation, count(*) AS runs "
                   "FROM spans WHERE name LIKE 'invoke_agent%' GROUP BY ALL ORDER BY conversation"))
        print("== tracescorer query: failing tool calls", flush=True)
        print(_cli(config, "query",
                   "SELECT trace_id, name, status_message FROM spans WHERE status_code = 'error' ORDER BY start_time"))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        log_file.close()
        print(f"== daemon stopped (exit code {code})", flush=True)
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0 if code == 0 else 1
