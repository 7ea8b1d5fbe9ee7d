"""Builders of store records for the store and assembly tests."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tracescorer.model import AgentRun, Message
from tracescorer.records.scores import AssemblyRecord, DecisionRecord, ScoreRecord


def assembly_record(trace_id: str) -> AssemblyRecord:
    """A trace assembled complete, with one span and no run."""
    return AssemblyRecord(
        trace_id=trace_id,
        reason="complete",
        incomplete=False,
        span_count=1,
        log_count=0,
        run_count=0,
        unmatched_reason=None,
        service_name=None,
        root_name=None,
    )


def numbered_run(i: int, conversation: str | None = None, *, trace: int | None = None) -> AgentRun:
    """Run number ``i`` (ids and times from ``i``; its trace id from ``trace`` if given), a turn
    of ``conversation``."""
    return AgentRun(
        run_id=f"run-{i}",
        trace_id=f"{trace if trace is not None else i:032x}",
        span_id=f"{i:016x}",
        parent_span_id=None,
        conversation_id=conversation,
        resource_id=None,
        agent_name="support",
        agent_id=None,
        service_name="svc",
        model="m",
        error=None,
        convention="genai",
        started_at=i * 1000,
        ended_at=i * 1000 + 5,
        status="ok",
        input_messages=(Message(role="user", content=f"q{i}"),),
        output=(Message(role="assistant", content=f"a{i}"),),
    )


def score_row(i: int, **fields: Any) -> ScoreRecord:
    """Score row ``s<i>`` of scorer ``s`` on run ``r<i>``, ok, 1.0 (``fields`` replace any)."""
    base = ScoreRecord(
        id=f"s{i}",
        scorer_id="s",
        scorer_name="s",
        run_id=f"r{i}",
        trace_id=None,
        span_id=None,
        conversation_id=None,
        entity_type="agent",
        entity_id=None,
        source="live",
        score=1.0,
        reason=None,
        status="ok",
    )
    return replace(base, **fields)


def decision_row(i: int, **fields: Any) -> DecisionRecord:
    """Decision ``d<i>``: scorer ``s`` scored run ``r<i>`` (``fields`` replace any)."""
    base = DecisionRecord(
        id=f"d{i}",
        scorer_id="s",
        target_type="run",
        target_id=f"r{i}",
        trace_id=None,
        conversation_id=None,
        decision="scored",
        detail=None,
        sample_rate=1.0,
        source="live",
    )
    return replace(base, **fields)
