"""Short transcript excerpts of judged targets, for a reviewer deciding who was right."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tracescorer.calibration.agreement import Verdict
from tracescorer.records.messages import message_text
from tracescorer.store.api import ReadStore

RUNS_PER_CONVERSATION = 4
MAX_CHARS = 600
_BATCH = 200  # targets per query


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def run_excerpt(run: dict[str, Any], limit: int = MAX_CHARS) -> str:
    """``user: … / assistant: …`` of one run: its new user turns and its answer."""
    pieces = []
    for message in _json(run.get("input_messages")) or []:
        if isinstance(message, dict) and message.get("role") == "user":
            pieces.append("user: " + message_text(message))
    for message in _json(run.get("output")) or []:
        text = message_text(message) if isinstance(message, dict) else ""
        if text:
            pieces.append(f"{message.get('role') or 'assistant'}: {text}")
    return _clip(" / ".join(p for p in pieces if p.strip()), limit)


async def excerpts(reads: ReadStore, judged: Sequence[Verdict], limit: int = MAX_CHARS) -> dict[tuple[str, str], str]:
    """An excerpt per target: a run's turns, or a conversation's latest runs."""
    out: dict[tuple[str, str], str] = {}
    for start in range(0, len(judged), _BATCH):
        part = judged[start : start + _BATCH]
        run_ids = sorted({v.target_id for v in part if v.target_type == "run"})
        conversations = sorted({v.target_id for v in part if v.target_type == "conversation"})
        if not run_ids and not conversations:
            continue
        found = (await reads.report_transcripts(run_ids, conversations, RUNS_PER_CONVERSATION)).dicts()
        by_run = {r["run_id"]: r for r in found}
        by_conversation: dict[str, list[dict[str, Any]]] = {}
        for r in found:
            if r.get("conversation_id"):
                by_conversation.setdefault(r["conversation_id"], []).append(r)
        for v in part:
            if v.target_type == "run" and v.target_id in by_run:
                out[v.key] = run_excerpt(by_run[v.target_id], limit)
            elif v.target_type == "conversation" and v.target_id in by_conversation:
                runs = by_conversation[v.target_id]
                share = max(80, limit // max(1, len(runs)))
                out[v.key] = _clip(" // ".join(run_excerpt(r, share) for r in runs), limit)
    return out
