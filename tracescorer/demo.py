"""``tracescorer demo``: the daemon's main job on built-in sample traffic, start to finish.

Starts ``tracescorer serve`` as a child process on free ports with a throw-away database, sends
a few multi-turn agent conversations through the OpenTelemetry SDK's OTLP exporter (the same
path a real agent takes), prints what the daemon stored, and stops it with SIGTERM.
"""

from __future__ import annotations

import contextlib
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
from tracescorer.store import queries

CONVERSATIONS: list[dict[str, Any]] = [
    {
        "id": "demo-conv-weather",
        "agent": "travel-assistant",
        "turns": [
            (
                "What's the weather in London tomorrow?",
                "get_weather",
                {"city": "London"},
                "Rain, 14C",
                "Tomorrow in London: rain and 14C. Take an umbrella.",
            ),
            (
                "And in Paris?",
                "get_weather",
                {"city": "Paris"},
                "Sunny, 22C",
                "Paris will be sunny and 22C, light clothes are fine.",
            ),
        ],
    },
    {
        "id": "demo-conv-refund",
        "agent": "support-bot",
        "turns": [
            (
                "I want a refund for order 1234.",
                None,
                None,
                None,
                "I'm sorry to hear that. Could you tell me why you want a refund?",
            ),
            ("It arrived broken.", None, None, None, "Thanks, I've noted it. Anything else?"),
        ],
    },
    {
        "id": "demo-conv-flaky-tool",
        "agent": "travel-assistant",
        "turns": [
            (
                "Book me a hotel in Rome for Friday.",
                "book_hotel",
                {"city": "Rome", "day": "Friday"},
                "ERROR: upstream timeout",
                "Sorry, the booking service failed. Please try again later.",
            ),
        ],
    },
]

SYSTEM = "You are a helpful assistant. Answer briefly."


def _messages(role: str, text: str) -> list[dict[str, Any]]:
    return [{"role": role, "parts": [{"type": "text", "content": text}]}]


def emit_conversations(
    grpc_endpoint: str,
    conversations: list[dict[str, Any]] | None = None,
    service_name: str = "demo-agents",
    *,
    exporter: Any = None,
    id_generator: Any = None,
    turns: slice | None = None,
) -> int:
    """Send conversations (default: the demo's) as OTel GenAI spans through the SDK's gRPC exporter
    (or ``exporter``, any SDK ``SpanExporter``).

    Each conversation is ``{"id", "agent", "turns": [(user, tool|None, args, result, answer), ...]}``;
    every turn is one ``invoke_agent`` trace carrying the history it was given; ``turns`` sends only
    those turns (with the earlier ones as history). Returns the runs sent.
    """
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import Status, StatusCode

    provider = TracerProvider(resource=Resource.create({"service.name": service_name}), id_generator=id_generator)
    provider.add_span_processor(BatchSpanProcessor(exporter or OTLPSpanExporter(endpoint=grpc_endpoint, insecure=True)))
    tracer = provider.get_tracer("tracescorer.demo")
    runs = 0
    for conv in CONVERSATIONS if conversations is None else conversations:
        history: list[dict[str, Any]] = []
        chosen = range(len(conv["turns"]))[turns] if turns is not None else range(len(conv["turns"]))
        for index, (user, tool, args, result, answer) in enumerate(conv["turns"]):
            new_input = _messages("user", user)
            if index not in chosen:
                history += new_input + _messages("assistant", answer)
                continue
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
                model_attrs: dict[str, str | int] = {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.usage.input_tokens": 42,
                    "gen_ai.usage.output_tokens": 17,
                }
                if tool:
                    with tracer.start_as_current_span("chat gpt-4o-mini", attributes=model_attrs):
                        pass
                    with tracer.start_as_current_span(
                        f"execute_tool {tool}",
                        attributes={
                            "gen_ai.operation.name": "execute_tool",
                            "gen_ai.tool.name": str(tool),
                            "gen_ai.tool.call.id": f"call_{runs}",
                            "gen_ai.tool.call.arguments": json.dumps(args),
                            "gen_ai.tool.call.result": result,
                        },
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
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return out.stdout


CRITERION = "The agent resolved what the user asked for."


def _demo_config(db: Path, judge: dict[str, Any]) -> dict[str, Any]:
    return {
        "receiver": {"grpc": {"host": "127.0.0.1", "port": 0}, "http": {"host": "127.0.0.1", "port": 0}},
        "api": {"port": 0},
        "store": {"path": str(db)},
        "assembly": {"idle_s": 0.5, "conversation_idle_s": 2.0},
        "judge": judge,
        "scorers": [
            {"id": "non-empty-response", "prebuilt": "non_empty_response", "scope": "run", "threshold": 1},
            {"id": "no-tool-errors", "prebuilt": "no_tool_errors", "scope": "run", "threshold": 1},
            {
                "id": "multi-turn-judge-scorer",
                "prebuilt": "multi_turn_judge",
                "scope": "conversation",
                "options": {"criterion": CRITERION},
                "threshold": 1,
            },
        ],
        "log_level": "WARNING",
    }


def _wait_for_scores(info: control.ServeInfo, expected: int, timeout_s: float = 90.0) -> int:
    deadline = time.monotonic() + timeout_s
    count = 0
    while time.monotonic() < deadline:
        count = int(control.remote_query(info, queries.scores_count().sql, max_rows=1)["rows"][0][0])
        if count >= expected:
            break
        time.sleep(0.5)
    return count


def run_demo(*, keep: bool = False) -> int:
    """Start the daemon, send the demo conversations, print scores and one explanation, stop."""
    workdir = Path(tempfile.mkdtemp(prefix="tracescorer-demo-"))
    db = workdir / "demo.duckdb"
    config = workdir / "tracescorer.yaml"
    model = os.environ.get("TRACESCORER_JUDGE_MODEL", "")
    cleanup = contextlib.ExitStack()
    if model:
        judge: dict[str, Any] = {"model": model}
        print(f"== judge: {model} (from TRACESCORER_JUDGE_MODEL)", flush=True)
    else:
        from tracescorer.demo_judge import StandInJudge

        stand_in = cleanup.enter_context(StandInJudge())
        judge = {"model": "openai/demo-stand-in", "api_base": stand_in.base_url, "api_key": "not-needed"}
        print(
            "== judge: no TRACESCORER_JUDGE_MODEL set, using a local RULE-BASED STAND-IN judge "
            f"(not an LLM) at {stand_in.base_url}",
            flush=True,
        )
    config.write_text(yaml.safe_dump(_demo_config(db, judge)))
    log_file = open(workdir / "daemon.log", "wb")  # noqa: SIM115 - closed with the process
    print(f"== starting tracescorer serve (workdir {workdir})", flush=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracescorer", "serve", "--config", str(config)],
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    ok = False
    try:
        info = control.wait_for_daemon(str(db), proc)
        if info is None:
            print((workdir / "daemon.log").read_text(), file=sys.stderr)
            print("daemon failed to start", file=sys.stderr)
            return 1
        print(f"== daemon up: OTLP gRPC 127.0.0.1:{info.grpc_port}, OTLP HTTP {info.url}", flush=True)
        runs = emit_conversations(f"127.0.0.1:{info.grpc_port}")
        print(f"== sent {runs} agent runs in {len(CONVERSATIONS)} conversations via the OTel SDK exporter", flush=True)
        expected = runs * 2 + len(CONVERSATIONS)
        print(
            f"== waiting for {expected} scores (runs: 2 code scorers; conversations: the multi-turn judge once idle)",
            flush=True,
        )
        got = _wait_for_scores(info, expected)
        print("\n== tracescorer runs", flush=True)
        print(_cli(config, "runs"))
        print("== tracescorer scores", flush=True)
        print(_cli(config, "scores"))
        failing = _cli(config, "query", queries.first_failed_trace().sql, "--format", "csv").splitlines()
        if len(failing) > 1:
            print(f"== tracescorer explain {failing[1]}  (the run whose tool failed)", flush=True)
            print(_cli(config, "explain", failing[1]))
        ok = got >= expected
        if not ok:
            print(f"only {got} of {expected} scores arrived in time; see {workdir / 'daemon.log'}", file=sys.stderr)
            keep = True
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        log_file.close()
        cleanup.close()
        print(f"== daemon stopped (exit code {code})", flush=True)
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0 if code == 0 and ok else 1
