"""Captured OTLP cases (tests/data/captures) and how their runs are checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracescorer.model import LogRecord, Span
from tracescorer.receiver.decode import (
    decode_logs_json,
    decode_logs_protobuf,
    decode_traces_json,
    decode_traces_protobuf,
)

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
CASES = sorted(p for p in CAPTURES.iterdir() if (p / "expected.json").is_file())


def load_case(case: Path) -> tuple[list[Span], list[LogRecord]]:
    spans: list[Span] = []
    logs: list[LogRecord] = []
    for f in sorted((case / "requests").glob("*")):
        decoded = (decode_traces_json if f.suffix == ".json" else decode_traces_protobuf)(f.read_bytes())
        assert not decoded.rejected, decoded.errors
        spans.extend(decoded.spans)
    for f in sorted((case / "logs").glob("*")) if (case / "logs").is_dir() else ():
        decoded_logs = (decode_logs_json if f.suffix == ".json" else decode_logs_protobuf)(f.read_bytes())
        assert not decoded_logs.rejected, decoded_logs.errors
        logs.extend(decoded_logs.records)
    return spans, logs


def _text_turns(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """User/assistant turns with text — the shape of expected.json's history_messages."""
    return [(m["role"], m["content"]) for m in messages if m["role"] in ("user", "assistant") and m["content"]]


def _final_text(run: dict[str, Any]) -> str | None:
    texts = [m["content"] for m in run["output"] if m["role"] == "assistant" and m["content"]]
    return texts[-1] if texts else None


def check_run(run: dict[str, Any], want: dict[str, Any], expected: dict[str, Any]) -> None:
    """Compare one run (AgentRun contract dict) with one run of a case's expected.json.

    ``agent_name``, ``conversation_id`` and ``user_id`` are the case's unless the run states its
    own (a nested agent's name and conversation).
    """
    assert run["agent_name"] == want.get("agent_name", expected["agent_name"])
    if "conversation_id" in want or "conversation_id" in expected:
        assert run["conversation_id"] == want.get("conversation_id", expected.get("conversation_id"))
    if want.get("user_id", expected.get("user_id")):
        assert run["resource_id"] == want.get("user_id", expected.get("user_id"))
    if "content_source" in want:
        assert run["attributes"].get("tracescorer.content_source") == want["content_source"]
    assert [(m["role"], m["content"]) for m in run["input_messages"]] == [
        (m["role"], m["content"]) for m in want["input_messages"]
    ]
    assert [m["content"] for m in run["system_messages"]] == want["system_messages"]
    assert _text_turns(run["remembered_messages"]) == [(m["role"], m["content"]) for m in want["history_messages"]]
    # History is never counted again as new input.
    assert not set(_text_turns(run["input_messages"])) & set(_text_turns(run["remembered_messages"]))
    assert _final_text(run) == want["output_text"]
    assert [(t["name"], t["arguments"]) for t in run["tool_calls"]] == [
        (t["name"], t["args"]) for t in want["tool_calls"]
    ]
    for res in want.get("tool_results", ()):
        match = [t for t in run["tool_calls"] if t["id"] == res["id"]]
        assert match, f"no tool call with id {res['id']}"
        assert match[0]["name"] == res["name"]
        assert match[0]["result"] == res["result"]
    if "llm_calls" in want:
        assert run["attributes"]["tracescorer.llm_calls"] == want["llm_calls"]
    assert "tracescorer.content_captured" not in run["attributes"]


def check_parents(runs: list[dict[str, Any]], expected: dict[str, Any]) -> None:
    """Nested runs link to their parent run: ``parent_run`` is the parent's index in ``runs``;
    a run without one is not nested in another run of the case."""
    span_ids = {r["span_id"] for r in runs}
    for run, want in zip(runs, expected["runs"], strict=False):
        parent = want.get("parent_run")
        if parent is None:
            assert run["parent_span_id"] not in span_ids, f"run {run['agent_name']} is nested"
        else:
            assert run["parent_span_id"] == runs[parent]["span_id"]


CONTRACT_KEYS = [
    "run_id",
    "trace_id",
    "span_id",
    "parent_span_id",
    "conversation_id",
    "resource_id",
    "agent_name",
    "agent_id",
    "service_name",
    "convention",
    "model",
    "started_at",
    "ended_at",
    "status",
    "error",
    "input_messages",
    "remembered_messages",
    "system_messages",
    "tagged_system_messages",
    "output",
    "tool_calls",
    "usage",
    "attributes",
]


def case_transport(case: Path, expected: dict[str, Any]) -> str:
    """grpc | http: from expected.json's transport, else the folder name's suffix."""
    declared = str(expected.get("transport", "")).lower()
    if declared:
        return "grpc" if declared.startswith("grpc") else "http"
    return "grpc" if case.name.endswith("grpc") else "http"
