"""The transcripts the report shows beside a score: per run, the user's turn, the tool calls with
their arguments and results, and the answer (``(empty answer)`` when the agent gave none)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tracescorer.records.messages import message_text
from tracescorer.store.api import ReadStore

MAX_TURN_CHARS = 600
MAX_TOOL_CHARS = 300


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    role: str  # user | assistant | tool
    text: str
    tool: str | None = None  # a tool call's tool name; ``text`` holds arguments and result
    failed: bool = False  # a tool call that returned an error
    empty: bool = False  # an answer without text


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTranscript:
    run_id: str
    trace_id: str
    agent: str | None
    turns: tuple[Turn, ...]


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def clip(text: str, limit: int = MAX_TURN_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _brief(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return clip(text, MAX_TOOL_CHARS)


def run_turns(run: dict[str, Any]) -> tuple[Turn, ...]:
    """One run's turns: user messages, tool calls (arguments → result), the assistant's answer."""
    turns = [
        Turn(role="user", text=clip(message_text(m)))
        for m in _json(run.get("input_messages")) or []
        if isinstance(m, dict) and m.get("role") == "user"
    ]
    for call in _json(run.get("tool_calls")) or []:
        if not isinstance(call, dict):
            continue
        error = call.get("error")
        outcome = f"error: {_brief(error)}" if error else _brief(call.get("result")) or "(no result recorded)"
        turns.append(
            Turn(
                role="tool",
                tool=str(call.get("name") or "?"),
                text=f"{_brief(call.get('arguments')) or '()'} → {outcome}",
                failed=bool(error),
            )
        )
    answers = [
        Turn(role=str(m.get("role") or "assistant"), text=clip(text))
        for m in _json(run.get("output")) or []
        if isinstance(m, dict) and (text := message_text(m))
    ]
    turns += answers or [Turn(role="assistant", text="(empty answer)", empty=True)]
    return tuple(turns)


async def transcripts(
    reads: ReadStore, scored: list[dict[str, Any]], runs_per_conversation: int
) -> dict[tuple[str, str], tuple[RunTranscript, ...]]:
    """The transcripts of the targets of ``scored`` (score rows), by ``(kind, id)``: a run, or the
    latest ``runs_per_conversation`` runs of a conversation."""
    run_ids = sorted({r["run_id"] for r in scored if r["entity_type"] != "conversation" and r["run_id"]})
    conversation_ids = sorted(
        {r["conversation_id"] for r in scored if r["entity_type"] == "conversation" and r["conversation_id"]}
    )
    if not run_ids and not conversation_ids:
        return {}
    runs = (await reads.report_transcripts(run_ids, conversation_ids, runs_per_conversation)).dicts()
    out: dict[tuple[str, str], tuple[RunTranscript, ...]] = {}
    for r in runs:
        shown = RunTranscript(run_id=r["run_id"], trace_id=r["trace_id"], agent=r["agent_name"], turns=run_turns(r))
        key = ("run", r["run_id"]) if r["part"] == "run" else ("conversation", r["conversation_id"])
        out[key] = (*out.get(key, ()), shown)
    return out
